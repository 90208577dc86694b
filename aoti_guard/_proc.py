"""The one place aoti-guard's build side starts helper processes (the ONNX Runtime reference, the
AOTI minifier, the debug twin's compile), each with a timeout.

A helper runs in a session of its own, so a timeout kills its whole process group (the minifier's
C++ compilers, Inductor's compile workers). Its output goes to files, not pipes: nothing to drain,
nothing to deadlock on, and a log the user can open afterwards.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtime_probe.child.isolation import child_environment
from runtime_probe.child.isolation import python_argv as _isolated_argv
from runtime_probe.child.worker import kill_session, signal_name

__all__ = ["ProcResult", "Running", "python_argv", "start"]


@dataclass(frozen=True)
class ProcResult:
    """How a helper process ended. ``output`` is the tail of its combined stdout and stderr."""

    argv: tuple[str, ...]
    returncode: int | None
    seconds: float
    timed_out: bool
    output: str
    log_path: str

    @property
    def signal(self) -> str | None:
        return signal_name(self.returncode)

    @property
    def how(self) -> str:
        """'exit code 1', 'SIGSEGV', 'timed out after 300s'."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f}s"
        return self.signal or f"exit code {self.returncode}"


def python_argv(module: str, *args: str) -> list[str]:
    """``python -P -X faulthandler -m MODULE ARGS`` with this interpreter: the working directory
    never shadows a module (runtime_probe/child/isolation.py)."""
    return _isolated_argv(module, *args)


class Running:
    """A started helper; ``wait`` for it (once)."""

    def __init__(self, argv: Sequence[str], proc: subprocess.Popen[bytes], log_path: str, started: float) -> None:
        self.argv = tuple(argv)
        self.proc = proc
        self.log_path = log_path
        self.started = started

    def wait(self, timeout: float, tail_bytes: int = 64 * 1024) -> ProcResult:
        """Wait up to ``timeout`` seconds; on timeout kill the process group."""
        timed_out = False
        try:
            self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
        except BaseException:  # Ctrl-C or a stop signal while waiting: the helper must not outlive us
            self.kill()
            raise
        self._kill_group()  # also reaps grandchildren left behind by a finished helper
        if timed_out:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        return ProcResult(
            self.argv, self.proc.returncode, time.monotonic() - self.started, timed_out, _tail(self.log_path, tail_bytes), self.log_path
        )

    def kill(self) -> None:
        """Kill the helper's whole process group (a no-op once it has ended and been reaped)."""
        self._kill_group()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def _kill_group(self) -> None:
        kill_session(self.proc.pid)


def start(argv: Sequence[str], *, log_path: str, cwd: str | None = None, env: Mapping[str, str | None] | None = None) -> Running:
    """Start ``argv`` with stdout and stderr written to ``log_path``.

    Args:
        env: variables to set (or, with None, unset) on top of this process's environment. The
            child always finds this very ``aoti_guard`` first on its path.
    """
    child_env = child_environment(env)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=child_env, start_new_session=True
        )
    return Running(argv, proc, log_path, time.monotonic())


def _tail(path: str, limit: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
