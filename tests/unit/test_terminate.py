"""Issue 40, finding 14: stop signals during the cleanup (runtime_probe/runtime/terminate.py), with real
signals to a child process that installs the handlers as the command lines do.

A cleanup that blocks (here a read that nothing ever answers) used to make every further SIGTERM
a no-op: only SIGKILL ended the process. A second signal now bounds the cleanup; a third ends
the process at once; both with the terminated exit code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime_probe.runtime.terminate import EXIT_TERMINATED

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import os, sys, time
from runtime_probe.runtime import terminate
terminate.CLEANUP_BOUND_S = float(sys.argv[1])
mode = sys.argv[2]
r, w = os.pipe()

def stopped():
    print("cleanup", flush=True)
    if mode == "blocks":
        os.read(r, 1)  # nothing ever writes it: a cleanup stuck for good
    else:
        time.sleep(0.5)  # a cleanup that finishes, after a second signal came

if mode == "library":
    with terminate.signals_raise():
        try:
            print("ready", flush=True)
            time.sleep(60)
        except terminate.Terminated:
            stopped()
    time.sleep(float(sys.argv[1]) * 1.5)  # a watchdog left armed would end the caller's process here
    print("the caller goes on", flush=True)
    sys.exit(0)
terminate.install()
try:
    print("ready", flush=True)
    time.sleep(60)
except terminate.Terminated:
    stopped()
sys.exit(0)
"""


def _start(bound_s: float, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(bound_s), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


def _signal_during_cleanup(proc: subprocess.Popen[str], count: int) -> None:
    assert proc.stdout is not None
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline() == "cleanup\n"
    for _ in range(count - 1):
        time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)


def _finish(proc: subprocess.Popen[str], seconds: float) -> tuple[int, str, str, float]:
    started = time.monotonic()
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the process was still running {seconds}s after the signals: only SIGKILL ended it")
    return proc.returncode, out, err, time.monotonic() - started


def test_a_second_sigterm_bounds_a_cleanup_that_blocks() -> None:
    proc = _start(1.0, "blocks")
    _signal_during_cleanup(proc, 2)
    code, _, err, took = _finish(proc, 20)
    assert code == EXIT_TERMINATED == 3, err
    assert "the cleanup did not finish within 1s of the second signal" in err
    assert took < 10


def test_a_third_sigterm_ends_it_at_once() -> None:
    proc = _start(600.0, "blocks")
    _signal_during_cleanup(proc, 3)
    code, _, err, took = _finish(proc, 20)
    assert code == EXIT_TERMINATED and "a third stop signal during the cleanup" in err, err
    assert took < 10


def test_one_sigterm_still_lets_the_cleanup_finish() -> None:
    proc = _start(0.2, "finishes")
    _signal_during_cleanup(proc, 1)
    code, _, err, _ = _finish(proc, 20)
    assert code == 0 and "exiting now" not in err, err


def test_a_library_callers_process_goes_on_after_a_cleanup_that_ended_in_time() -> None:
    """signals_raise: a second signal armed the watchdog, the cleanup ended within its bound: the
    watchdog is cancelled, the caller's process is not ended later."""
    proc = _start(2.0, "library")
    _signal_during_cleanup(proc, 2)
    code, out, err, _ = _finish(proc, 20)
    assert code == 0 and "the caller goes on" in out, err
