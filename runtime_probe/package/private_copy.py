"""The bytes that were verified are the bytes that are loaded: one private copy of the package.

A package checked at one path and loaded from the same path later can be swapped in between
(TOCTOU): the archive phase would vouch for one file and torch would load another. So the file is
opened ONCE, without following a FIFO into a blocking open, checked to be a regular file through
that descriptor, and copied from it into a folder only this user can enter (mkdtemp, 0700). Every
later step (hashes, signature, loading, the ladder's reruns) reads the copy; the copy is removed
with its folder.
"""

from __future__ import annotations

import errno
import os
import stat

from runtime_probe.errors import UsageError
from runtime_probe.findings import Finding, error

__all__ = ["private_copy", "tmpdir_finding"]

_CHUNK = 8 << 20


def private_copy(path: str, folder: str) -> str:
    """Copy ``path`` into ``folder`` (created 0700) through one descriptor; returns the copy's path.

    Raises:
        UsageError: the path does not exist or is not a regular file (a FIFO is refused, never read).
        OSError: the copy could not be written (TMPDIR full or read-only).
    """
    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(f"no such package: {path}", hint="check the path; a package is a .pt2 file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{path} is not a regular file", hint="pass the .pt2 file, not a folder, FIFO or device")
        os.set_blocking(fd, True)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        dst = os.path.join(folder, os.path.basename(path) or "package.pt2")
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _copy(fd, out)
        finally:
            os.close(out)
        return dst
    finally:
        os.close(fd)


def _copy(src: int, dst: int) -> None:
    """All of ``src`` (read from offset 0 to its end, whatever its size became) into ``dst``."""
    offset = 0
    while True:
        chunk = os.pread(src, _CHUNK, offset)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            written = os.write(dst, view)
            view = view[written:]
        offset += len(chunk)


def tmpdir_finding(exc: OSError, folder: str, phase: str = "archive", who: str = "the probe") -> Finding:
    """The finding for a temporary folder that cannot hold the probe's (or ``who``'s) files."""
    why = {errno.ENOSPC: "is full", errno.EROFS: "is read-only", errno.EACCES: "is not writable", errno.EFBIG: "refuses a file this large"}
    state = why.get(exc.errno or 0, f"cannot be written ({exc.strerror})")
    return error(
        "env.tmpdir_unusable",
        phase,
        f"the temporary folder {os.path.dirname(folder.rstrip('/')) or folder} {state}: {who} keeps a private copy of the package there",
        expected="a writable TMPDIR with room for the package and its extracted model",
        found=f"{exc.strerror or exc}",
        hint="set TMPDIR to a writable folder with free space at least twice the package's size",
    )
