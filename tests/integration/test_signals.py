"""Issue 25, defect 5: SIGTERM and SIGHUP end a build or a probe like Ctrl-C: the report is
written, every process the run started is gone (the twin's compile child, the validation child,
gdb's program and that program's own children), and no staging folder is left.

"Every process the run started" is checked without trusting the tool's own bookkeeping: each run
gets a random marker in its environment, which every descendant inherits, and /proc is scanned
for it after the run ended.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.faults import inject_env

from .conftest import MODELS, Built

pytestmark = pytest.mark.integration


def marked(marker: str) -> list[int]:
    """Live processes whose environment carries ``marker`` (zombies have none: they are gone)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _wait_gone(marker: str, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return marked(marker)


def _wait_for(condition: Any, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before the signal could be sent"
        assert time.monotonic() < deadline, "the run never reached the point where the signal is sent"
        time.sleep(0.05)


def _findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for p in report["phases"] for f in p["findings"]]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_build_stopped_mid_compile_writes_its_report_and_leaves_nothing(tmp_path: Path, signum: int) -> None:
    marker = uuid.uuid4().hex
    out, report = tmp_path / "m.pt2", tmp_path / "build.json"
    junit, log = tmp_path / "build.xml", tmp_path / "build.log"
    reports = ["--json", str(report), "--junit", str(junit), "--log-file", str(log)]
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "aoti_guard", "build", f"{MODELS}:static", "-o", str(out), *reports],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "AOTI_GUARD_TEST_MARKER": marker},
    )
    try:
        # the debug twin's compile child starts with the release compile: both are under way
        _wait_for(lambda: any(tmp_path.glob(".aoti-guard-*/twin/twin-child.log")), proc, 180)
        time.sleep(1.0)
        running = marked(marker)
        assert len(running) >= 3, f"expected the build, its validation child and the twin's compile child, found {running}"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err.decode()[-2000:]
    data = json.loads(report.read_text())
    terminated = [f for f in _findings(data) if f["code"] == "env.terminated"]
    assert [f["found"] for f in terminated] == [signal.Signals(signum).name]
    phases = {p["name"]: p["status"] for p in data["phases"]}
    assert phases["compile"] == "failed" and phases["package"] == "skipped" and data["exit_code"] == 3
    assert junit.read_text().startswith("<?xml")
    assert _wait_gone(marker) == [], "processes of the build survived it"
    assert list(tmp_path.glob(".aoti-guard-*")) == [], "the staging folder was left beside -o"
    assert not out.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_probe_stopped_while_its_child_hangs_writes_its_report_and_leaves_nothing(static_pkg: Built, tmp_path: Path, signum: int) -> None:
    marker = uuid.uuid4().hex
    tmpdir, pidfile, report = tmp_path / "tmp", tmp_path / "grandchild.pid", tmp_path / "probe.json"
    tmpdir.mkdir()
    env = {
        **os.environ,
        **inject_env(tmp_path, "hang"),
        "TMPDIR": str(tmpdir),
        "AOTI_GUARD_TEST_PIDFILE": str(pidfile),
        "AOTI_GUARD_TEST_MARKER": marker,
    }
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "aoti_guard", "probe", str(static_pkg.path), "--json", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        _wait_for(pidfile.exists, proc, 120)  # the child hangs in load, with a grandchild
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err.decode()[-2000:]
    terminated = [f for f in _findings(json.loads(report.read_text())) if f["code"] == "env.terminated"]
    assert [(f["phase"], f["found"]) for f in terminated] == [("load", signal.Signals(signum).name)]
    assert _wait_gone(marker) == [], "processes of the probe survived it"
    assert os.listdir(tmpdir) == []


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed (.ci/run installs it)")
def test_gdb_step_leaves_no_process_of_the_package_running(static_pkg: Built, tmp_path: Path) -> None:
    """The package starts a helper process, then crashes at load: the ladder reruns it under gdb,
    which runs it in a process group of its own; its helper must not outlive the probe, and the
    step says how the program ended (gdb itself exits 0)."""
    marker = uuid.uuid4().hex
    report = tmp_path / "gdb.json"
    env = {**os.environ, **inject_env(tmp_path, "crash_grandchild"), "AOTI_GUARD_TEST_MARKER": marker}
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "runtime_probe", str(static_pkg.path), "--json", str(report), "--escalate-timeout", "300"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert _wait_gone(marker, 5.0) == [], "the package's helper process outlived the probe"
    data = json.loads(report.read_text())
    steps = {s["step"]: s for s in next(p for p in data["phases"] if p["name"] == "escalate")["detail"]["steps"]}
    assert steps["native"]["outcome"] == "crashed (SIGSEGV, under gdb)"
    assert steps["strict"]["outcome"] == "crashed (SIGSEGV)"
