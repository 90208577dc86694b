"""Where a report goes: stdout (``-``), a non-regular file written in place, or a regular file
replaced atomically; and never over a file the run reads (the package, its key, its weights).

Why in place for non-regular targets: renaming a temporary file over ``/dev/stdout`` (a symlink)
or a FIFO replaces it with a regular file, so the pipeline that waits on it reads nothing and, as
root, ``/dev/stdout`` is gone. Why the umask: a report is not a secret, so it gets the mode any
other file the user writes would get (0644 under the usual umask), unlike mkstemp's 0600.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
import time
from collections.abc import Iterable

from runtime_probe.errors import ToolError, UsageError

__all__ = ["STDOUT", "check_report_path", "current_umask", "is_stdout", "same_path", "write_atomic", "write_output"]

STDOUT = "-"


def current_umask() -> int:
    """The process umask (read by setting and restoring it: there is no getter before 3.13)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> None:
    """Write via a temp file in the same folder and os.replace: readers never see half a file.

    ``mode``: the file's permission bits, set before any byte is written (the temp file starts at
    0600, so a secret is never readable by others, not even briefly); default: 0666 less the umask,
    as ``open()`` would give.
    """
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    bits = mode if mode is not None else 0o666 & ~current_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    except OSError as exc:
        raise ToolError(f"cannot write {target}: {exc.strerror}", hint="check the folder exists and is writable") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), bits)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
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


_READER_WAIT_S = 10.0


def _write_in_place(path: str, data: bytes) -> None:
    """Write into a device or FIFO as it is. O_NONBLOCK for the open: a FIFO with no reader fails
    (ENXIO) instead of hanging, and is retried for a few seconds, the time a pipeline's reader may
    take to start; the write itself then blocks as a pipe write should."""
    deadline = time.monotonic() + _READER_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                raise ToolError(
                    f"cannot write the report to {path}: {exc.strerror}", hint="give a regular file, '-' or a FIFO with a reader"
                ) from exc
            time.sleep(0.05)
    os.set_blocking(fd, True)
    with open(fd, "wb") as fh:
        fh.write(data)


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
