"""Run what can crash the interpreter in a fresh child interpreter, and talk to it.

The child (``python -P -X faulthandler -m runtime_probe.child.main``: the working directory never
shadows a module, see child/isolation.py) is started with spawn semantics (a new interpreter,
never a fork of one that may have initialised CUDA). Its stdout and stderr are
pipes drained into bounded buffers: AOTI prints the real reason of many failures to file
descriptor 2, and a package that prints megabytes must not exhaust our memory. Requests and
replies travel as JSON lines over two extra pipes, so the captured output stays untouched.

A dead child becomes a ``ChildCrashed`` (signal, Python stack from faulthandler, native lines), a
hung one a ``ChildTimeout`` after its whole process group is killed. Both carry the captured
output, so the caller can turn them into findings.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.child.isolation import child_environment, python_argv
from runtime_probe.package.extractions import extractions_of, made_by_the_loader, remove_leftover_extractions

__all__ = ["BoundedCapture", "ChildCrashed", "ChildFailure", "ChildRaised", "ChildTimeout", "Worker", "kill_session", "signal_name"]


class BoundedCapture:
    """Keeps the first ``head`` and the last ``tail`` bytes of a stream, and counts the rest."""

    def __init__(self, head: int = 64 * 1024, tail: int = 1024 * 1024) -> None:
        self._head_cap, self._tail_cap = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            room = self._head_cap - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > self._tail_cap:
                    del self.tail[: len(self.tail) - self._tail_cap]

    @property
    def dropped(self) -> int:
        return max(0, self.total - len(self.head) - len(self.tail))

    def text(self) -> str:
        with self._lock:
            head, tail, dropped = bytes(self.head), bytes(self.tail), self.dropped
        middle = f"\n[... {dropped} bytes not kept ...]\n".encode() if dropped else b""
        return (head + middle + tail).decode("utf-8", "replace")

    def since(self, mark: int) -> str:
        """What was written after the stream had ``mark`` bytes (as much of it as was kept)."""
        with self._lock:
            start_of_tail = self.total - len(self.tail)
            if mark >= len(self.head):
                data = bytes(self.tail[max(0, mark - start_of_tail) :])
            else:
                data = bytes(self.head[mark:]) + (bytes(self.tail) if self.total > len(self.head) else b"")
        return data.decode("utf-8", "replace")


def session_members(sid: int) -> list[int]:
    """The processes of session ``sid`` (Linux /proc; empty elsewhere)."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 3 and int(fields[3]) == sid and int(name) != os.getpid():
            found.append(int(name))
    return found


def kill_session(leader: int) -> None:
    """SIGKILL everything a child started with ``start_new_session=True`` left running: its process
    group, and the other groups of its session. A debugger puts the program it runs in a process
    group of its own (gdb does), so killing the debugger's group leaves that program and its own
    children running; they stay in the session, so the session is what is killed."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(5):  # a process may fork while the list is read: read it again until empty
        members = session_members(leader)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


_FAULT_HEAD = re.compile(r"^Fatal Python error: (.*)$")
_PY_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
_TRACEBACK_LINE = re.compile(r'^(Traceback \(most recent call last\)|\s+File ".*", line \d+|\s{4}\S)')
_NOISE = re.compile(
    r"(UserWarning|FutureWarning|DeprecationWarning|warnings\.warn|^\s*$|^Current thread|^Thread 0x|^Extension modules:|Fatal Python error|^\s+File \")"
)


def python_stack(stderr: str) -> list[str]:
    """The faulthandler frames ('file:line in func'), innermost first, of the crashing thread."""
    lines = stderr.splitlines()
    start = next((i for i in range(len(lines) - 1, -1, -1) if _FAULT_HEAD.match(lines[i])), None)
    if start is None:
        return []
    frames = []
    for line in lines[start + 1 :]:
        m = _PY_FRAME.match(line)
        if m:
            frames.append(f"{m.group(1)}:{m.group(2)} in {m.group(3)}")
        elif frames and not line.startswith(("Current thread", "Thread 0x", "  ")):
            break
    return frames


def native_lines(stderr: str, limit: int = 30) -> list[str]:
    """Lines of stderr that are not Python tracebacks, faulthandler output or warnings: what C++
    code printed (AOTI's ``Error: ...``, ``terminate called``, allocator aborts)."""
    out = []
    in_fault = False
    for line in stderr.splitlines():
        if _FAULT_HEAD.match(line):
            in_fault = True
            continue
        if in_fault:
            if line.startswith(("  ", "Current thread", "Thread 0x", "Extension modules", "\n")) or not line.strip():
                continue
            in_fault = False
        if _NOISE.search(line) or _TRACEBACK_LINE.match(line):
            continue
        out.append(line.rstrip())
    return out[-limit:]


@dataclass
class ChildFailure(Exception):
    """The child could not answer a request. ``stdout``/``stderr``: output of that request."""

    op: str
    stdout: str
    stderr: str
    seconds: float
    returncode: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"child failed during {self.op}"


class ChildCrashed(ChildFailure):
    """The child died (a signal, or an exit without answering)."""

    @property
    def signal(self) -> str | None:
        return signal_name(self.returncode)

    def __str__(self) -> str:
        how = self.signal or f"exit code {self.returncode}"
        return f"child died ({how}) during {self.op}"


class ChildTimeout(ChildFailure):
    def __str__(self) -> str:
        return f"child did not answer {self.op} within {self.seconds:.0f}s"


class ChildRaised(ChildFailure):
    """The child is alive but the request raised a Python exception there."""

    @property
    def error_type(self) -> str:
        return str(self.evidence.get("type", "Exception"))

    @property
    def message(self) -> str:
        return str(self.evidence.get("message", ""))

    def __str__(self) -> str:
        return f"{self.error_type}: {self.message}"


def _unread(fd: int) -> int:
    """Bytes waiting in a pipe (FIONREAD); 0 when it cannot be asked."""
    try:
        count: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        return count
    except OSError:
        return 0


class Worker:
    """One child interpreter serving requests. Use as a context manager.

    Args:
        env: variables to set (or, with value None, unset) in the child's environment.
        python: the interpreter to run (the probe's own by default).
        prefix: argv to run the interpreter under (``["compute-sanitizer", "--tool", "memcheck"]``).
    """

    def __init__(
        self, env: Mapping[str, str | None] | None = None, *, python: str | None = None, cwd: str | None = None, prefix: Sequence[str] = ()
    ) -> None:
        child_env = child_environment(env)
        child_env.setdefault("PYTHONFAULTHANDLER", "1")
        if not prefix:  # under a debugger the interpreter's parent is the debugger
            child_env["RUNTIME_PROBE_PARENT_PID"] = str(os.getpid())
        else:
            child_env.pop("RUNTIME_PROBE_PARENT_PID", None)
        self.env = child_env
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        # ``prefix`` runs the child under another program: a debugger or compute-sanitizer.
        self.argv = [*prefix, *python_argv("runtime_probe.child.main", str(cmd_r), str(res_w), python=python)]
        # Under a debugger or compute-sanitizer the child exits the ordinary way (the tool may
        # report at teardown); otherwise it skips the interpreter's slow module teardown.
        self._fast_exit = not prefix
        self.stdout = BoundedCapture()
        self.stderr = BoundedCapture()
        self.started = time.monotonic()
        self._started_wall = time.time()  # what the child's loader makes is newer (extractions.made_by_the_loader)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(cmd_r, res_w),
                env=child_env,
                cwd=cwd,
                start_new_session=True,  # a process group of its own: a timeout kills grandchildren too
            )
        finally:
            os.close(cmd_r)
            os.close(res_w)
        self._drain_lock = threading.Lock()
        self._readers = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, self.stderr), daemon=True),
        ]
        for t in self._readers:
            t.start()
        self._buf = b""
        self._pending: tuple[str, int, int, float] | None = None
        self._pending_package: tuple[str, float] | None = None  # a request's package path, and when it was sent
        self.closed = False
        # the folders the child's loads were extracted to (its "load" replies say): torch removes
        # each when its model is destroyed, which a crashed or killed child never does
        self.extractions: set[str] = set()

    def _drain(self, stream: Any, capture: BoundedCapture) -> None:
        """Copy one of the child's output pipes into its capture. Bytes are read and fed under
        ``_drain_lock`` only, so ``_settle`` can tell when all that was written has arrived."""
        fd = stream.fileno()
        while True:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            with self._drain_lock:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    stream.close()
                    return
                capture.feed(chunk)

    def _settle(self, limit: float = 2.0) -> None:
        """Wait until the output pipes hold no unread bytes. The child writes its stderr (AOTI logs
        the real reason there) before its reply, but on another pipe: without this the reader
        thread may not have copied those lines yet when the reply arrives."""
        deadline = time.monotonic() + limit
        streams = [s for s in (self.proc.stdout, self.proc.stderr) if s is not None]
        while True:
            with self._drain_lock:
                if all(s.closed or _unread(s.fileno()) == 0 for s in streams):
                    return
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def request(self, op: str, timeout: float, **args: Any) -> Any:
        """Send one request and wait for its answer.

        Raises:
            ChildRaised: the request raised in the child (the child lives on).
            ChildCrashed: the child died; ChildTimeout: no answer in ``timeout`` seconds (killed).
        """
        self.submit(op, **args)
        return self.collect(op, timeout)

    def submit(self, op: str, **args: Any) -> None:
        """Send a request without waiting; ``collect`` its answer later (one in flight at a time)."""
        if self.closed:
            raise RuntimeError("worker is closed")
        if self._pending is not None:
            raise RuntimeError(f"request {self._pending[0]} is still in flight")
        self._pending = (op, self.stdout.total, self.stderr.total, time.monotonic())
        self._pending_package = (str(args["path"]), time.time()) if isinstance(args.get("path"), str) else None
        try:
            os.write(self._cmd_w, (json.dumps({"op": op, "args": args}) + "\n").encode())
        except (BrokenPipeError, OSError):
            pass  # the child is gone; collect reports how it died

    def collect(self, op: str, timeout: float) -> Any:
        """Wait for the answer to the request in flight (see ``request`` for what it raises)."""
        if self._pending is None or self._pending[0] != op:
            raise RuntimeError(f"no request {op} in flight")
        _, out_mark, err_mark, started = self._pending
        self._pending = None
        line, eof = self._read_line(time.monotonic() + timeout)
        seconds = time.monotonic() - started
        if line is not None:
            self._pending_package = None
        if line is None:
            if eof:
                # The pipe closed as the child exited; give the exit a moment to complete.
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.kill()
            if self.proc.poll() is None:
                self.kill()
                self._join_readers()
                raise ChildTimeout(op, self.stdout.since(out_mark), self.stderr.since(err_mark), seconds, None)
            self.proc.wait()
            kill_session(self.proc.pid)  # what it left running (a debugger's program, its children) holds the pipes
            self._join_readers()
            self.closed = True
            self._remove_leftover_extractions()
            stderr = self.stderr.since(err_mark)
            raise ChildCrashed(
                op,
                self.stdout.since(out_mark),
                stderr,
                seconds,
                self.proc.returncode,
                {"signal": signal_name(self.proc.returncode), "python_stack": python_stack(stderr), "native": native_lines(stderr)},
            )
        reply = json.loads(line)
        self._settle()
        if not reply.get("ok"):
            raise ChildRaised(op, self.stdout.since(out_mark), self.stderr.since(err_mark), seconds, None, dict(reply.get("error") or {}))
        result = reply.get("result")
        if isinstance(result, dict) and isinstance(result.get("extracted_to"), list):
            # the child may run a hostile package's code: only what the loader could have made counts
            self.extractions.update(
                p for p in result["extracted_to"] if isinstance(p, str) and made_by_the_loader(p, self._temp_dirs(), self._started_wall)
            )
        return result

    def _read_line(self, deadline: float) -> tuple[str | None, bool]:
        """(a reply line, or None on timeout/EOF; whether the pipe reached EOF)."""
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, False
            ready, _, _ = select.select([self._res_r], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                return None, True
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(), False

    def _join_readers(self) -> None:
        for t in self._readers:
            t.join(timeout=5)

    def kill(self) -> None:
        """Kill the child's whole session (its own children too, also those a debugger runs)."""
        kill_session(self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.closed = True
        self._remove_leftover_extractions()

    def _remove_leftover_extractions(self) -> None:
        """Remove the package copies a dead child left (runtime_probe/package/extractions.py)."""
        if self._pending_package is not None:  # it died (or hung) in a request that loads: nothing named its copy
            package, since = self._pending_package
            self._pending_package = None
            # torch 2.11 extracts to /tmp/XXXXXX whatever TMPDIR says; 2.13+ to TMPDIR
            self.extractions.update(extractions_of(package, self._temp_dirs(), since))
        remove_leftover_extractions(self.extractions, self._temp_dirs(), self._started_wall)

    def _temp_dirs(self) -> list[str]:
        """Where the child's loader extracts: its TMPDIR (torch 2.13+) and /tmp (2.11's fixed place)."""
        return ["/tmp", self.env.get("TMPDIR") or ""]

    def close(self, timeout: float = 10.0) -> None:
        if not self.closed and self.proc.poll() is None:
            try:
                os.write(self._cmd_w, (json.dumps({"op": "exit", "args": {"fast": self._fast_exit}}) + "\n").encode())
            except OSError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.kill()
        else:
            # Grandchildren the child left behind die with its session.
            kill_session(self.proc.pid)
        self.closed = True
        self._join_readers()
        self._remove_leftover_extractions()  # none after an orderly exit: torch removed them
        for fd in (self._cmd_w, self._res_r):
            try:
                os.close(fd)
            except OSError:
                pass
