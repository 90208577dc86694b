"""The build explains its own failures with the probe's instruments (issue 13, cases 2 and 3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.faults import inject_env

from .conftest import MODELS, run_cli

pytestmark = pytest.mark.integration


def _findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for p in report["phases"] for f in p["findings"]]


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed (.ci/run installs it)")
def test_build_diagnoses_a_crash_at_load_like_the_probe(tmp_path: Path) -> None:
    """The validation child dies in libstdc++ at load (the GPU machine's C++ runtime mismatch,
    injected on CPU): the same run names the cause, verifies an LD_PRELOAD remedy and gives the
    durable fix naming the build's compiler and the process's libstdc++."""
    report_path = tmp_path / "build.json"
    proc = run_cli(
        "build",
        f"{MODELS}:static",
        "-o",
        str(tmp_path / "m.pt2"),
        "--json",
        str(report_path),
        "--no-debug-twin",
        env=inject_env(tmp_path, "cxx"),
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    findings = _findings(json.loads(report_path.read_text()))
    crash = next(f for f in findings if f["code"] == "load.crash")
    assert crash["found"] == "SIGSEGV" and "aoti-guard probe" not in (crash["hint"] or "")
    cause = next(f for f in findings if f["code"] == "env.cxx_runtime_mismatch" and f["severity"] == "error")
    assert cause["expected"] and "build compiler" in cause["expected"]  # names the compiler that built it
    assert "libstdc++" in (cause["found"] or "") and "durable fix: rebuild the package" in cause["hint"]
    remedy = next(f for f in findings if f["code"] == "env.cxx_runtime_mismatch" and f["severity"] == "info")
    assert remedy["evidence"]["remedy"]["verified"] is True
    assert "verified remedy: with LD_PRELOAD=" in proc.stdout


def test_build_reports_the_twins_nan_like_the_probe(tmp_path: Path) -> None:
    """A fully masked softmax row: build.nonfinite on the output, and the twin's evidence in the
    same terms as the probe's: the twin's value printer (level 2) names the first NaN's buffer and
    the softmax kernel that wrote it, on CPU too (the NaN asserts it had before issue 26 covered
    the graph inputs alone on CPU)."""
    report_path = tmp_path / "build.json"
    proc = run_cli("build", f"{MODELS}:masked_softmax", "-o", str(tmp_path / "m.pt2"), "--json", str(report_path))
    assert proc.returncode == 1, proc.stdout[-3000:]
    findings = _findings(json.loads(report_path.read_text()))
    assert any(f["code"] == "build.nonfinite" and f["severity"] == "error" and "holds" in f["message"] for f in findings)
    twin = [f for f in findings if f["code"] == "build.nonfinite" and "debug twin" in f["message"]]
    assert len(twin) == 1 and "cpp_fused__softmax" in twin[0]["message"], [(f["code"], f["message"][:200]) for f in findings]
    assert twin[0]["evidence"]["launched"]
    assert not any(f["code"] == "build.twin_failed" for f in findings)


def test_a_crashing_validation_child_leaves_nothing_in_tmpdir(tmp_path: Path) -> None:
    """Issue 16 (5) for the build: the child crashes after torch extracted the package to its
    TMPDIR, then the ladder reruns it; the extractions are inside the build's work folder."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**inject_env(tmp_path, "crash_after_load"), "TMPDIR": str(tmpdir)}
    proc = run_cli("build", f"{MODELS}:static", "-o", str(tmp_path / "m.pt2"), "--no-debug-twin", env=env)
    assert proc.returncode == 1 and "load.crash" in proc.stdout, proc.stdout[-3000:]
    # torch's loader extracts to TMPDIR/aotinductor_XXXXXX (the build's own Inductor cache may be there too)
    assert [p.name for p in tmpdir.iterdir() if p.name.startswith("aotinductor_")] == []
