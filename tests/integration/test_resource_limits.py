"""A build under a file-size limit (``ulimit -f``) says the limit stopped it, in the phase where it
hit, with the evidence and a hint; not "likely an Inductor bug" (what ``build.compile_failed``
said), nor "aoti-guard failed unexpectedly (a bug)" (what a Python write's EFBIG gave). Exit 3:
the machine, not the model, stopped the build."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import HERE, MODELS

pytestmark = pytest.mark.integration


def _build_under_ulimit(kib: int, tmp_path: Path, target: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``aoti-guard build`` in a shell whose file-size limit is ``kib`` KiB (bash's ulimit -f unit)."""
    report = tmp_path / "build.json"
    argv = [sys.executable, "-m", "aoti_guard", "build", target, "-o", str(tmp_path / "m.pt2"), "--json", str(report), *extra]
    proc = subprocess.run(["bash", "-c", f"ulimit -f {kib} && exec {shlex.join(argv)}"], capture_output=True, text=True, timeout=900)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(report.read_text())


def _findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for p in report["phases"] for f in p["findings"]]


def test_a_file_size_limit_in_the_compile_is_a_resource_finding(tmp_path: Path) -> None:
    """g++'s cc1plus is killed by SIGXFSZ writing its output: the compile phase says so."""
    proc, report = _build_under_ulimit(1024, tmp_path, f"{MODELS}:static", "--no-debug-twin")
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [f for f in _findings(report) if f["severity"] == "error"]
    assert [(f["code"], f["phase"]) for f in errors] == [("build.resource_exhausted", "compile")]
    (f,) = errors
    assert "a file reached the file-size limit (ulimit -f)" in f["message"] and "File size limit exceeded" in f["found"]
    assert f["evidence"]["resource"] == "file_size" and f["evidence"]["rlimit_fsize_bytes"] == 1024 * 1024
    assert "ulimit -f unlimited" in f["hint"]
    text = proc.stdout + proc.stderr
    assert "Inductor bug" not in text and "build.compile_failed" not in text and "Traceback" not in text


def test_a_file_size_limit_on_a_python_write_is_a_resource_finding(tmp_path: Path) -> None:
    """16 MiB of weights outside the .so, a limit of 8000 KiB: the compile passes and the build's
    own Python write of the weights fails with EFBIG (Python ignores SIGXFSZ)."""
    proc, report = _build_under_ulimit(
        8000,
        tmp_path,
        f"{HERE / 'resource_models.py'}:wide",
        "--no-debug-twin",
        "--inductor-config",
        "aot_inductor.package_constants_in_so=false",
    )
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [f for f in _findings(report) if f["severity"] == "error"]
    assert [f["code"] for f in errors] == ["build.resource_exhausted"]
    (f,) = errors
    assert f["evidence"]["errno"] == "EFBIG" and f["evidence"]["rlimit_fsize_bytes"] == 8000 * 1024
    assert f["found"].startswith("EFBIG") and f["evidence"]["at"]
    assert "failed unexpectedly" not in proc.stderr and "bug in aoti-guard" not in proc.stderr
