"""A process per pytest worker that has imported torch, Dynamo, export and Inductor once, and forks
the command lines the tests run most (``python -m aoti_guard build ...``, the public-record
corpus's children) instead of starting a fresh interpreter for each (issue 41: CI's time).

Why: a build's own process spends ~3 CPU-s importing torch, Dynamo and Inductor before it does
anything, and a lane starts ~150 builds (docs/benchmarks.md "The zygote"). A forked child skips
those imports and is otherwise the command line a user runs: a process of its own (a crash or
``os._exit`` ends only it), ``sys.argv``, environment, working directory, stdin, stdout and
stderr as ``subprocess.run`` gives them, the exit status of ``python -m MODULE`` (``-N`` for a
signal), and the served module imported afresh in the child: the zygote never imports
``aoti_guard`` or ``runtime_probe``, so an import the product forgot still fails there.

Where it cannot be that, it steps aside (``run`` returns None and the caller starts the real
process): a request whose environment differs from the zygote's in anything but ``AOTI_GUARD_*``
and ``PYTEST_CURRENT_TEST`` (torch, Inductor and Python read much of it at import: ``CXX``,
``TORCHINDUCTOR_*``, ``TMPDIR``, ``PYTHON*``), a module it does not serve. Tests about the
process itself (signals, resource limits, ``-P``, the console script) start real processes and
never come here. ``AOTI_GUARD_TEST_ZYGOTE=0`` turns it off for a run (tests/unit/test_zygote.py).

The protocol, over a Unix socket in the worker's temporary folder: the client sends a JSON
request with its stdin and two pipes' write ends (SCM_RIGHTS); the zygote forks, answers the
child's pid, and when the child ends its exit status. The zygote ends when its worker does.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import locale
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# a build, and the public-record corpus's bare and guarded children (tests/realbugs/runner.py)
SERVED = ("aoti_guard", "tests.realbugs.child")
# what those import before they do anything (-X importtime of a build: 3.1 of its 3.5 s of imports)
PRELOAD = ("torch", "torch.export", "torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.cpp_builder", "sympy", "click")
_FREE_KEYS = frozenset({"PYTEST_CURRENT_TEST"})
_FREE_PREFIXES = ("AOTI_GUARD_",)
_REPO = Path(__file__).resolve().parents[2]
_MAX_REQUEST = 1 << 22
_STARTUP_S = 180.0
_AFTER_KILL_S = 10.0


def enabled() -> bool:
    return os.environ.get("AOTI_GUARD_TEST_ZYGOTE", "1") != "0"


def differing_keys(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """The environment variables in which two environments differ and a forked child could not
    follow (the ones read at import, i.e. all but ours and pytest's test name)."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k not in _FREE_KEYS and not k.startswith(_FREE_PREFIXES))


class Zygote:
    """The client's handle on one zygote process, started on first use."""

    def __init__(self, served: Iterable[str] = SERVED, preload: Iterable[str] = PRELOAD) -> None:
        self.served = tuple(served)
        self.preload = tuple(preload)
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._path = ""
        self._env: dict[str, str] = {}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> bool:
        """Start the zygote if it is not running; False if it could not be."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return True
            self._path = os.path.join(tempfile.mkdtemp(prefix="aoti-guard-zygote-"), "socket")
            self._env = dict(os.environ)
            spec = json.dumps({"path": self._path, "served": self.served, "preload": self.preload})
            # this environment given explicitly: the C-level one a bare Popen passes can differ from
            # os.environ (seen under pytest: COLUMNS and LINES in one and not the other)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tests.tools.zygote", spec], stdin=subprocess.DEVNULL, cwd=_REPO, env=self._env
            )
            atexit.register(self.close)
            deadline = time.monotonic() + _STARTUP_S
            while not os.path.exists(self._path):
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self._proc.kill()
                    return False
                time.sleep(0.02)
            return True

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        with contextlib.suppress(OSError):
            os.unlink(self._path)
            os.rmdir(os.path.dirname(self._path))

    def run(
        self, module: str, args: list[str], *, env: dict[str, str], cwd: str | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str] | None:
        """``subprocess.run([sys.executable, "-m", MODULE, *ARGS], capture_output=True,
        text=True, env=ENV, cwd=CWD, timeout=TIMEOUT)`` by a fork of the zygote, or None where it
        steps aside. A timeout kills the child and raises ``subprocess.TimeoutExpired``."""
        if not enabled() or module not in self.served or not self.start() or differing_keys(env, self._env):
            return None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self._path)
            request = {"module": module, "args": list(args), "env": env, "cwd": os.path.abspath(cwd or os.getcwd())}
            fds = array.array("i", [0, out_w, err_w])
            conn.sendmsg([json.dumps(request).encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        finally:
            os.close(out_w)
            os.close(err_w)
        with conn, conn.makefile("rb") as answers:
            first = json.loads(answers.readline() or b'{"refused": true}')
            if "pid" not in first:
                os.close(out_r)
                os.close(err_r)
                return None
            stdout, stderr, timed_out = _drain(out_r, err_r, timeout, int(first["pid"]))
            last = answers.readline()
        argv = [sys.executable, "-m", module, *args]
        if timed_out:
            raise subprocess.TimeoutExpired(argv, timeout or 0.0, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(argv, json.loads(last)["status"] if last else -signal.SIGKILL, stdout, stderr)


_default = Zygote()


def run(
    module: str, args: list[str], *, env: dict[str, str], cwd: str | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str] | None:
    """The worker's zygote (``Zygote.run``)."""
    return _default.run(module, args, env=env, cwd=cwd, timeout=timeout)


def _drain(out_r: int, err_r: int, timeout: float | None, pid: int) -> tuple[str, str, bool]:
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    open_fds = {out_r, err_r}
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], None if deadline is None else max(0.0, deadline - time.monotonic()))
        if not ready:
            if timed_out:  # something it started still holds the pipes
                break
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + _AFTER_KILL_S  # what it wrote, until the pipes close
            continue
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if data:
                chunks[fd].append(data)
            else:
                open_fds.discard(fd)
                os.close(fd)
    for fd in open_fds:
        os.close(fd)
    return _text(chunks[out_r]), _text(chunks[err_r]), timed_out


def _text(chunks: list[bytes]) -> str:
    """As ``subprocess.run(text=True)`` decodes: the locale's encoding, universal newlines."""
    text = b"".join(chunks).decode(locale.getpreferredencoding(False), errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------------------------------------
# the zygote process


def _serve(path: str, served: tuple[str, ...], preload: tuple[str, ...]) -> None:
    for name in preload:
        __import__(name)
    base_env = dict(os.environ)
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(8)
    os.rename(path + ".tmp", path)  # the name appears only once it listens
    running: dict[int, socket.socket] = {}
    while os.getppid() == parent:  # its worker ended: so does it, and what it forked
        if select.select([listener], [], [], 0.05)[0]:
            conn, _ = listener.accept()
            _accept(conn, listener, served, base_env, running)
        _reap(running)
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _accept(
    conn: socket.socket, listener: socket.socket, served: tuple[str, ...], base_env: dict[str, str], running: dict[int, socket.socket]
) -> None:
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(_MAX_REQUEST, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    try:
        request = json.loads(data)
        ok = len(fds) == 3 and request["module"] in served and not differing_keys(request["env"], base_env)
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        with contextlib.suppress(OSError):
            conn.sendall(b'{"refused": true}\n')
        conn.close()
        for fd in fds:
            os.close(fd)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        for other in running.values():
            other.close()
        _become(request, list(fds))
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    running[pid] = conn


def _reap(running: dict[int, socket.socket]) -> None:
    for pid in list(running):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            conn = running.pop(pid)
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            conn.close()


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """The forked child: become ``python -m MODULE ARGS`` in the request's world; never returns."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None
        import random

        random.seed()  # a fresh interpreter's state, not the zygote's
        sys.path[0] = request["cwd"]  # where ``python -m`` puts the working directory
        for name in [m for m in sys.modules if m == "tests" or m.startswith("tests.")]:
            del sys.modules[name]  # the zygote's own package: a real interpreter has not imported it
        sys.orig_argv = [sys.executable, "-m", request["module"], *request["args"]]
        sys.argv = [request["module"], *request["args"]]
        import runpy

        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what an uncaught exception prints in a real interpreter, then exit 1
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    _serve(spec["path"], tuple(spec["served"]), tuple(spec["preload"]))
