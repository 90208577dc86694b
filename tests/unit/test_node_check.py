"""runtime_probe.node_check's exit codes where no verdict was reached or delivered (issue 40): a
SIGTERM while the probe starts, a stdout that is closed or a broken pipe, ``--probe-args --fast``.

node_check runs in a child with a fake probe (``python_argv`` replaced: a tiny interpreter that
writes a probe-shaped report and records its argv), so these need no package and take a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime_probe import node_check

ROOT = Path(__file__).resolve().parents[2]

# the fake probe: its argv to FAKE_ARGV, a report saying FAKE_CODE at --json, exit FAKE_CODE
FAKE_PROBE = """
import json, os, sys
args = sys.argv[1:]
json.dump(args, open(os.environ["FAKE_ARGV"], "w"))
code = int(os.environ.get("FAKE_CODE", "0"))
json.dump({"kind": "probe", "exit_code": code}, open(args[args.index("--json") + 1], "w"))
sys.exit(code)
"""

# node_check.main with the fake probe; FAKE_STOP_IN_POPEN sends node_check a SIGTERM right after
# the probe's fork, before Popen returns (where a pod's deletion or scancel can land)
DRIVER = """
import os, signal, subprocess, sys
from runtime_probe import node_check
node_check.python_argv = lambda module, *args: [sys.executable, "-c", os.environ["FAKE_PROBE"], *args]
if os.environ.get("FAKE_STOP_IN_POPEN"):
    real_init = subprocess.Popen.__init__
    def init(self, *a, **k):
        real_init(self, *a, **k)
        open(os.environ["FAKE_PIDFILE"], "w").write(str(self.pid))
        os.kill(os.getpid(), signal.SIGTERM)
    subprocess.Popen.__init__ = init
sys.exit(node_check.main(sys.argv[1:]))
"""


def run_node_check(tmp_path: Path, *args: str, stdout: Any = subprocess.PIPE, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FAKE_PROBE": FAKE_PROBE,
        "FAKE_ARGV": str(tmp_path / "probe-argv.json"),
        "FAKE_PIDFILE": str(tmp_path / "probe.pid"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", DRIVER, "/m/model.pt2", "--node", "n1", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
        timeout=60,
    )


def test_option_values_that_start_with_a_dash_reach_the_option() -> None:
    assert node_check._joined(["p.pt2", "--probe-args", "--fast", "--node", "-n1"]) == ["p.pt2", "--probe-args=--fast", "--node=-n1"]
    assert node_check._joined(["p.pt2", "--probe-args=--fast"]) == ["p.pt2", "--probe-args=--fast"]
    assert node_check._joined(["--", "--probe-args", "x"]) == ["--", "--probe-args", "x"]
    assert "--probe-args=--fast" in node_check._parser().epilog  # the help's example works as written


@pytest.mark.parametrize("form", [["--probe-args", "--fast"], ["--probe-args=--fast"], ["--probe-args", "--fast --timeout 60"]])
def test_probe_args_that_start_with_a_dash_reach_the_probe(tmp_path: Path, form: list[str]) -> None:
    proc = run_node_check(tmp_path, *form)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kind"] == "probe"
    assert json.loads((tmp_path / "probe-argv.json").read_text())[-1] in ("--fast", "60")


@pytest.mark.parametrize("verdict", [0, 1])
def test_sigterm_while_the_probe_starts_is_no_verdict_and_kills_the_probe(tmp_path: Path, verdict: int) -> None:
    proc = run_node_check(tmp_path, "--report-dir", str(tmp_path / "r"), FAKE_STOP_IN_POPEN="1", FAKE_CODE=str(verdict))
    assert proc.returncode == 2, proc.stderr  # never 1 ("does not fit": the node drained), never a traceback
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["kind"] == node_check.NO_VERDICT_KIND and "SIGTERM" in doc["reason"]
    assert json.loads((tmp_path / "r" / "n1.json").read_text())["kind"] == node_check.NO_VERDICT_KIND
    pid = int((tmp_path / "probe.pid").read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running in its own session
        os.kill(pid, 0)


def test_a_closed_stdout_is_no_verdict_not_a_failure(tmp_path: Path) -> None:
    proc = run_node_check(tmp_path, stdout=subprocess.DEVNULL, FAKE_CODE="0")
    assert proc.returncode == 0  # /dev/null takes the verdict
    closed = subprocess.run(
        ["bash", "-c", 'exec "$@" >&-', "bash", sys.executable, "-c", DRIVER, "/m/model.pt2", "--node", "n1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FAKE_PROBE": FAKE_PROBE, "FAKE_ARGV": str(tmp_path / "argv.json")},
    )
    assert closed.returncode == 2, closed.stderr
    assert "could not be written to stdout" in closed.stderr and "Traceback" not in closed.stderr


def test_a_broken_pipe_is_no_verdict_not_a_failure(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_PROBE": FAKE_PROBE, "FAKE_ARGV": str(tmp_path / "argv.json"), "FAKE_CODE": "1"}
    script = 'python_=$1; shift; "$python_" "$@" | true; echo "rc=${PIPESTATUS[0]}"'
    proc = subprocess.run(
        ["bash", "-c", script, "bash", sys.executable, "-c", DRIVER, "/m/model.pt2", "--node", "n1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.stdout.strip() == "rc=2", proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
