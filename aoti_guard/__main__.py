"""``python -m aoti_guard``: the ``aoti-guard`` command line (aoti_guard/cli.py)."""

from __future__ import annotations

from aoti_guard.cli import run

run()
