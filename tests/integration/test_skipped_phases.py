"""A phase with nothing to do says skipped, and why, in the JSON and the text: the build's
debug_twin under --no-debug-twin, a plain package's golden phase (no samples)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .conftest import Built, run_probe

pytestmark = pytest.mark.integration


def test_no_debug_twin_is_skipped(static_pkg: Built) -> None:
    assert static_pkg.report is not None
    twin = next(p for p in static_pkg.report["phases"] if p["name"] == "debug_twin")
    assert twin["status"] == "skipped" and twin["detail"]["reason"] == "--no-debug-twin"
    assert re.search(r"debug_twin +skipped +0\.00s  \(--no-debug-twin\)", static_pkg.stdout + static_pkg.stderr)


def test_plain_package_golden_is_skipped(plain_pkg: Path) -> None:
    proc = run_probe(str(plain_pkg), "--json", "-")
    report = json.loads(proc.stdout)
    golden = next(p for p in report["phases"] if p["name"] == "golden")
    assert golden["status"] == "skipped" and golden["detail"]["reason"] == "no golden samples in the package, and no --inputs"
    assert [f["code"] for f in golden["findings"]] == ["golden.missing"]  # still a warning
    assert "golden     skipped" in proc.stderr and "(no golden samples in the package, and no --inputs)" in proc.stderr
