"""Where a report goes: stdout (``-``), a non-regular file written in place, or a regular file
replaced atomically; and never over a file the run reads (the package, its key, its weights).

Why in place for non-regular targets: renaming a temporary file over ``/dev/stdout`` (a symlink)
or a FIFO replaces it with a regular file, so the pipeline that waits on it reads nothing and, as
root, ``/dev/stdout`` is gone. Why the umask: a report is not a secret, so it gets the mode any
other file the user writes would get (0644 under the usual umask), unlike mkstemp's 0600.

Why nothing here may block: a report, ``--log-file`` or ``$GITHUB_STEP_SUMMARY`` can name a FIFO
or a device. ``open()`` of a FIFO waits for a reader forever, and a write to a pipe whose reader
stopped reading waits forever too; a signal's cleanup that writes the error report then hangs
again. Every write to such a target goes through ``open_nonblocking`` (a missing reader is an
error after ``_READER_WAIT_S``) and ``write_all`` (a reader that takes nothing for ``_STALL_S``
is an error): a report output may fail, it never hangs the run.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import sys
import tempfile
import time
from collections.abc import Iterable

from runtime_probe.reporting.errors import ToolError, UsageError
from runtime_probe.reporting.escaping import for_terminal

__all__ = [
    "STDOUT",
    "append_output",
    "check_report_path",
    "current_umask",
    "is_stdout",
    "open_nonblocking",
    "same_path",
    "write_all",
    "write_atomic",
    "write_output",
]

STDOUT = "-"


def current_umask() -> int:
    """The process umask (read by setting and restoring it: there is no getter before 3.13)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None, exclusive: bool = False) -> None:
    """Write via a temp file in the same folder and os.replace: readers never see half a file.

    ``mode``: the file's permission bits, set before any byte is written (the temp file starts at
    0600, so a secret is never readable by others, not even briefly); default: 0666 less the umask,
    as ``open()`` would give.
    ``exclusive``: the file must not exist; its name is taken with ``O_EXCL`` (an empty file, for a
    moment) before the full file replaces it, so of two writers racing for one name exactly one
    wins and the other gets ``FileExistsError``, never a silent overwrite.

    Raises:
        FileExistsError: ``exclusive`` and ``path`` exists (a symlink, even a dangling one, too).
        ToolError: the folder cannot be written.
    """
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    bits = mode if mode is not None else 0o666 & ~current_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    except OSError as exc:
        raise ToolError(f"cannot write {for_terminal(target)}: {exc.strerror}", hint="check the folder exists and is writable") from exc
    reserved = False
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), bits)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            reserved = True
        os.replace(tmp, target)
    except BaseException:
        for leftover in (tmp, target) if reserved else (tmp,):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        raise


def _is_special(path: str) -> bool:
    """An existing target that is not a regular file (a device, a FIFO, a socket), symlinks followed."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def write_output(path: str, data: bytes) -> None:
    """Write a report: ``-`` to stdout, a non-regular target in place, else atomically."""
    if path == STDOUT:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    if _is_special(path):
        _write_in_place(path, data)
        return
    write_atomic(path, data)


# A FIFO's reader may start a moment after the writer (both ends of a pipeline start together).
_READER_WAIT_S = 10.0
# A reader that took nothing for this long has stopped: the output is given up, the run goes on.
_STALL_S = 10.0


def open_nonblocking(path: str, what: str, *, append: bool = False, reader_wait_s: float | None = None) -> int:
    """A file descriptor for writing ``path`` whose open never blocks, and whose writes never do
    (it stays O_NONBLOCK: write it with ``write_all``). A FIFO without a reader fails with ENXIO
    instead of waiting for one forever; it is retried for ``reader_wait_s`` (default
    ``_READER_WAIT_S``). O_NOCTTY: a terminal device never becomes this process's terminal.
    ``append``: O_APPEND, creating a missing file (``$GITHUB_STEP_SUMMARY``, ``--log-file``).
    ``what``: how a message names the output ("the report to r.json").

    Raises:
        ToolError: it cannot be opened (no reader came, a folder, no permission).
    """
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (os.O_APPEND | os.O_CREAT if append else 0)
    deadline = time.monotonic() + (_READER_WAIT_S if reader_wait_s is None else reader_wait_s)
    while True:
        try:
            return os.open(path, flags, 0o666)
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                why = "it is a FIFO (or device) with no reader" if exc.errno == errno.ENXIO else exc.strerror
                raise ToolError(
                    f"cannot write {for_terminal(what)}: {why}", hint="give a regular file, '-' or a FIFO with a reader"
                ) from exc
            time.sleep(0.05)


def write_all(fd: int, data: bytes, what: str, *, stall_s: float | None = None) -> None:
    """Write all of ``data`` to a non-blocking ``fd``, waiting while a pipe is full, but never more
    than ``stall_s`` (default ``_STALL_S``) without a byte taken.

    Raises:
        ToolError: the reader stalled, went away (EPIPE) or the write failed.
    """
    bound = _STALL_S if stall_s is None else stall_s
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    last = time.monotonic()
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            n = 0
        except OSError as exc:
            raise ToolError(f"cannot write {for_terminal(what)}: {exc.strerror}", hint="check the reader of that output") from exc
        if n:
            view = view[n:]
            last = time.monotonic()
            continue
        remaining = last + bound - time.monotonic()
        if remaining <= 0:
            raise ToolError(
                f"cannot write {for_terminal(what)}: its reader took nothing for {bound:g}s",
                hint="read the FIFO to its end, or give a regular file",
            )
        poller.poll(int(min(remaining, 1.0) * 1000) + 1)


def append_output(path: str, data: bytes, what: str) -> None:
    """Append ``data`` to ``path`` (created if missing) without ever blocking: a FIFO or device
    with no reader, or one that stops reading, is a ToolError, not a hang."""
    fd = open_nonblocking(path, what, append=True)
    try:
        write_all(fd, data, what)
    finally:
        os.close(fd)


def _write_in_place(path: str, data: bytes) -> None:
    """Write into a device or FIFO as it is (see ``open_nonblocking`` and ``write_all``)."""
    what = f"the report to {path}"
    fd = open_nonblocking(path, what)
    try:
        write_all(fd, data, what)
    finally:
        os.close(fd)


def is_stdout(path: str | None) -> bool:
    """``-``, or a path that is this process's stdout (``/dev/stdout``, ``/dev/fd/1``)."""
    if not path:
        return False
    if path == STDOUT:
        return True
    try:
        mine, theirs = os.fstat(sys.stdout.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def same_path(a: str, b: str) -> bool:
    """The two paths name one file (symlinks and hard links followed)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_report_path(path: str | None, flag: str, inputs: Iterable[tuple[str, str | None]] = ()) -> None:
    """Refuse (UsageError, exit 2) a report path whose folder is missing, or that names a file the
    run reads: ``inputs`` are (what, path) pairs such as ("the package", PKG)."""
    if path is None or path == STDOUT:
        return
    for what, other in inputs:
        if other and same_path(path, other):
            raise UsageError(
                f"{flag} {path} is {what}: writing the report there would destroy it",
                hint=f"give {flag} another file, or '-' for stdout",
            )
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a folder", hint=f"give {flag} a file name, or '-' for stdout")
    if _is_special(path):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{flag}: folder {folder} does not exist", hint="create it first, or give '-' for stdout")
