"""The pre-flight entrypoint on a real package, on this host (the container tests run it in images)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Built

pytestmark = pytest.mark.integration


def test_passing_package_execs_the_server_and_the_check_passes(static_pkg: Built, tmp_path: Path) -> None:
    report, flag = tmp_path / "pf" / "report.json", tmp_path / "server-ran"
    server = [sys.executable, "-c", f"import os; open({str(flag)!r}, 'w').write(str(os.getpid()))"]
    base = [sys.executable, "-m", "runtime_probe.preflight", "--package", str(static_pkg.path), "--report", str(report)]
    proc = subprocess.Popen([*base, "--", *server], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    assert "PASSED" in out
    assert flag.read_text() == str(proc.pid)  # exec: the server replaced the pre-flight (same PID)
    data = json.loads(report.read_text())
    assert data["passed"] and [r["sample"] for r in next(p for p in data["phases"] if p["name"] == "golden")["detail"]["runs"]] == [
        "example"
    ]  # --fast
    check = subprocess.run([*base, "--check"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "pre-flight passed" in check.stdout
