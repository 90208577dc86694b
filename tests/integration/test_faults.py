"""Faults around the probe's child, through the real CLI on a real package (tests/hostile/faults.py):
a child that hangs (timeout, its own children killed too), one the kernel kills for memory, one
that prints megabytes, a package on a read-only mount, several probes of one package at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.faults import SCENARIOS

from .conftest import Built

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_fault(scenario: str, static_pkg: Built, tmp_path: Path) -> None:
    result = SCENARIOS[scenario](static_pkg.path, tmp_path)
    if result.skipped:
        pytest.skip(result.skipped)
    assert not result.problems, f"{result.name}: {result.observed}\n" + "\n".join(result.problems)
