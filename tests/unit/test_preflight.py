"""runtime_probe.preflight without torch: the health check's rules, usage errors, a failing package."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime_probe import preflight


def _marker_for(pkg: Path, report: Path) -> None:
    Path(str(report) + ".ok").write_text(json.dumps(preflight._stamp(str(pkg))))


def test_check_needs_a_passing_result_for_this_very_file(tmp_path: Path) -> None:
    pkg, report = tmp_path / "m.pt2", tmp_path / "r.json"
    pkg.write_bytes(b"x" * 10)
    ok, why = preflight.check(str(pkg), str(report))
    assert not ok and "no passing pre-flight result" in why
    _marker_for(pkg, report)
    assert preflight.check(str(pkg), str(report))[0]
    st = pkg.stat()
    os.utime(pkg, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # replaced under a running server
    ok, why = preflight.check(str(pkg), str(report))
    assert not ok and "changed since" in why
    pkg.unlink()
    assert not preflight.check(str(pkg), str(report))[0]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime_probe.preflight", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_no_package_is_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "AOTI_PACKAGE"}
    proc = subprocess.run([sys.executable, "-m", "runtime_probe.preflight"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and "AOTI_PACKAGE" in proc.stderr


def test_failing_package_does_not_start_the_server(tmp_path: Path) -> None:
    pkg, report, flag = tmp_path / "m.pt2", tmp_path / "out" / "r.json", tmp_path / "server-ran"
    pkg.write_bytes(b"not a zip")
    Path(str(report) + ".ok").parent.mkdir()
    Path(str(report) + ".ok").write_text("{}")  # a stale result from an earlier start
    proc = _run("--report", str(report), "--", sys.executable, "-c", f"open({str(flag)!r}, 'w')", env={"AOTI_PACKAGE": str(pkg)})
    assert proc.returncode == 1, proc.stderr
    assert not flag.exists()
    assert "archive.unreadable" in proc.stdout and "the server is not started" in proc.stderr
    assert json.loads(report.read_text())["passed"] is False
    assert not Path(str(report) + ".ok").exists()  # the stale result was removed before probing
    assert _run("--check", "--report", str(report), "--package", str(pkg)).returncode == 1


def test_bad_probe_args_are_usage_errors(tmp_path: Path) -> None:
    proc = _run("--package", str(tmp_path / "m.pt2"), "--probe-args", "--fast 'unclosed")
    assert proc.returncode == 2 and "AOTI_PREFLIGHT_ARGS" in proc.stderr


def test_a_report_over_the_package_is_refused_before_anything_is_removed(tmp_path: Path) -> None:
    """Issue 40, finding 6: the stale report was unlinked before the probe's path rule ran, so
    AOTI_PREFLIGHT_REPORT naming the package deleted it."""
    pkg, flag = tmp_path / "m.pt2", tmp_path / "server-ran"
    pkg.write_bytes(b"the release")
    server = ["--", sys.executable, "-c", f"open({str(flag)!r}, 'w')"]
    proc = _run(*server, env={"AOTI_PACKAGE": str(pkg), "AOTI_PREFLIGHT_REPORT": str(pkg)})
    assert proc.returncode == 2, proc.stderr
    assert "would overwrite the package being checked" in proc.stderr and "the server is not started" in proc.stderr
    assert pkg.read_bytes() == b"the release" and not flag.exists()


@pytest.mark.parametrize("marker", [False, True], ids=["report", "marker"])
def test_a_report_or_marker_over_the_public_key_is_refused(tmp_path: Path, marker: bool) -> None:
    pkg, key = tmp_path / "m.pt2", tmp_path / "release.pub"
    pkg.write_bytes(b"the release")
    key.write_bytes(b"the public key")
    report = tmp_path / "release" if marker else key
    if marker:
        key = key.rename(tmp_path / "release.ok")
    env = {"AOTI_PACKAGE": str(pkg), "AOTI_PREFLIGHT_REPORT": str(report), "AOTI_PREFLIGHT_ARGS": f"--fast --public-key {key}"}
    proc = _run(env=env)
    assert proc.returncode == 2 and "would overwrite the public key" in proc.stderr, proc.stderr
    assert "give --report (AOTI_PREFLIGHT_REPORT) another path" in proc.stderr
    assert key.read_bytes() == b"the public key"


@pytest.mark.parametrize("args", ["--version", "--help", "-h", "--vers", "--fast --he", "--verify-only", "--fast --json other.json"])
def test_probe_args_that_would_not_probe_fail_the_pre_flight(tmp_path: Path, args: str) -> None:
    """Issue 40, finding 11: AOTI_PREFLIGHT_ARGS=--version exited 0 without probing, and an init
    container passed. Whatever the probe would not probe with (abbreviations as argparse takes
    them) fails closed, before the earlier result is removed."""
    pkg, report, flag = tmp_path / "m.pt2", tmp_path / "r.json", tmp_path / "server-ran"
    pkg.write_bytes(b"the release")
    report.write_text("{}")
    server = ["--", sys.executable, "-c", f"open({str(flag)!r}, 'w')"]
    proc = _run(*server, env={"AOTI_PACKAGE": str(pkg), "AOTI_PREFLIGHT_REPORT": str(report), "AOTI_PREFLIGHT_ARGS": args})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "AOTI_PREFLIGHT_ARGS" in proc.stderr and "hint:" in proc.stderr and "nothing was probed" in proc.stderr
    assert proc.stdout == "" and not flag.exists()  # no help or version text passed off as a result


def test_a_fifo_report_is_not_removed(tmp_path: Path) -> None:
    """A report written in place (a FIFO) is no stale file: it stays, as a FIFO."""
    pkg, fifo = tmp_path / "m.pt2", tmp_path / "r.fifo"
    pkg.write_bytes(b"not a zip")
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = _run(env={"AOTI_PACKAGE": str(pkg), "AOTI_PREFLIGHT_REPORT": str(fifo)})
    reader.join(30)
    assert proc.returncode == 1, proc.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and json.loads(got[0])["passed"] is False
