"""Attacks: parsers (issue 40). See tests/hostile/attack.py."""

from __future__ import annotations

from tests.hostile.attack import Attack

ATTACKS: list[Attack] = []
