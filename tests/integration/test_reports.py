"""Real reports against the shipped JSON Schemas; --strict on a plain package; torch's warnings
kept off the terminal of a real build."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ..schemas import validate
from .conftest import Built, run_cli, run_probe

pytestmark = pytest.mark.integration


def test_build_report_is_schema_valid_and_holds_torch_warnings_off_the_terminal(example_pkg: Built) -> None:
    assert example_pkg.returncode == 0 and example_pkg.report is not None
    validate("build-report", example_pkg.report)
    assert "Warning" not in example_pkg.stderr  # FutureWarning LeafSpec, the TF32 hint: not on the terminal
    assert all(isinstance(line, str) for line in example_pkg.report["extra"].get("log", []))


def test_passing_and_failing_probe_reports_are_schema_valid(example_pkg: Built, tmp_path: Path) -> None:
    proc = run_probe(str(example_pkg.path), "--json", "-", "-q")
    assert proc.returncode == 0
    validate("probe-report", json.loads(proc.stdout))
    broken = tmp_path / "broken.pt2"
    data = bytearray(example_pkg.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    broken.write_bytes(bytes(data))
    proc = run_probe(str(broken), "--json", "-", "-q")
    assert proc.returncode == 1
    validate("probe-report", json.loads(proc.stdout))


def test_strict_fails_a_plain_package_that_passes_without_it(plain_pkg: Path) -> None:
    lax = run_probe(str(plain_pkg), "--fast", "--json", "-", "-q")
    report = json.loads(lax.stdout)
    warnings = [f["code"] for p in report["phases"] for f in p["findings"] if f["severity"] == "warning"]
    assert lax.returncode == 0 and warnings, lax.stderr
    strict = run_probe(str(plain_pkg), "--fast", "--strict", "--json", "-")
    report = json.loads(strict.stdout)
    assert strict.returncode == 1 and report["exit_code"] == 1 and report["strict"] is True
    assert "(--strict: warnings fail)" in strict.stderr
    validate("probe-report", report)
    via_click = run_cli("probe", str(plain_pkg), "--fast", "--strict", "-q")
    assert via_click.returncode == 1


@pytest.mark.parametrize("which", ["built", "plain", "damaged"])
def test_inspect_json_is_schema_valid(which: str, example_pkg: Built, plain_pkg: Path, tmp_path: Path) -> None:
    path = {"built": example_pkg.path, "plain": plain_pkg}.get(which)
    if path is None:
        path = tmp_path / "damaged.pt2"
        shutil.copyfile(example_pkg.path, path)
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size // 2)
    proc = run_cli("inspect", str(path), "--json")
    data = json.loads(proc.stdout)
    validate("inspect", data)
    assert data["schema_version"] == "1.0"
    if which == "plain":
        assert "manifest" not in data and data["missing"]
    if which == "built":
        assert data["manifest"]["io"] and not data["problems"]
