"""runtime_probe.preflight without torch: the health check's rules, usage errors, a failing package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
