"""The bytes that were verified are the bytes that are loaded: one private copy of the package.

A package checked at one path and loaded from the same path later can be swapped in between
(TOCTOU): the archive phase would vouch for one file and torch would load another. So the file is
opened ONCE, without following a FIFO into a blocking open, checked to be a regular file through
that descriptor, and copied from it into a folder only this user can enter (mkdtemp, 0700). Every
later step (hashes, signature, loading, the ladder's reruns) reads the copy; the copy is removed
with its folder.

Before anything is copied, the zip's end records, central directory and entry layout are read in
place through that descriptor (``archive.check_in_place``): a file that is no package is refused
without a byte written to TMPDIR (a 5 GB sparse file took 52 s and 5 GB of TMPDIR, or ended as
``env.tmpdir_unusable`` under a small one: issue 40). Then exactly the size that was checked is
copied. A read of the package that fails is the package's finding (``archive.unreadable``, with
the OS error); only a failed write is the temporary folder's.
"""

from __future__ import annotations

import errno
import os

from runtime_probe.package.archive import PHASE, Limits, check_in_place, open_package_file
from runtime_probe.reporting.errors import PackageRejected
from runtime_probe.reporting.findings import Finding, error, has_errors

__all__ = ["private_copy", "tmpdir_finding"]

_CHUNK = 8 << 20


def private_copy(path: str, folder: str) -> str:
    """Copy ``path`` into ``folder`` (created 0700) through one descriptor; returns the copy's path.

    Raises:
        UsageError: the path does not exist or is not a regular file (a FIFO is refused, never read).
        PackageRejected: the file is not a zip the archive phase could open (its end records,
            directory or layout, read in place: nothing was copied), or reading it failed
            (``archive.unreadable`` with the OS error); ``.findings`` says which.
        OSError: the copy could not be written (TMPDIR full or read-only).
    """
    with open_package_file(path) as fh:  # one descriptor: what is checked is what is copied
        size = os.fstat(fh.fileno()).st_size
        problems = check_in_place(fh, os.path.basename(path), size, Limits())
        if has_errors(problems):
            raise PackageRejected(f"{path} is not a usable package", problems)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        dst = os.path.join(folder, os.path.basename(path) or "package.pt2")
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _copy(fh.fileno(), out, size, path)
        except PackageRejected:
            os.unlink(dst)
            raise
        finally:
            os.close(out)
        return dst


def _copy(src: int, dst: int, size: int, path: str) -> None:
    """The first ``size`` bytes of ``src`` (the size that was checked) into ``dst``. A read that
    fails, or a file that ends early (it shrank meanwhile), raises PackageRejected; a write that
    fails raises its OSError."""
    offset = 0
    while offset < size:
        try:
            chunk = os.pread(src, min(_CHUNK, size - offset), offset)
        except OSError as exc:
            raise PackageRejected(f"{path} cannot be read", [_read_error(path, offset, exc)]) from None
        if not chunk:
            raise PackageRejected(f"{path} changed while it was copied", [_shrank(path, size, offset)])
        view = memoryview(chunk)
        while view:
            written = os.write(dst, view)
            view = view[written:]
        offset += len(chunk)


def _read_error(path: str, offset: int, exc: OSError) -> Finding:
    """``archive.unreadable`` for a read of the package itself that failed (EIO, a network file
    system gone): the package's problem, never the temporary folder's."""
    return error(
        "archive.unreadable",
        PHASE,
        f"{os.path.basename(path)} cannot be read at byte {offset}: {exc.strerror or exc}",
        expected="a package file that can be read to its end",
        found=f"{errno.errorcode.get(exc.errno or 0, 'error')}: {exc.strerror or exc}",
        hint="the disk or file system holding the package failed; copy it to a healthy disk and probe it again",
    )


def _shrank(path: str, size: int, offset: int) -> Finding:
    return error(
        "archive.unreadable",
        PHASE,
        f"{os.path.basename(path)} ended at byte {offset} while it was copied, though it had {size} bytes when it was checked",
        expected=f"{size} bytes",
        found=f"{offset} bytes",
        hint="something truncated or rewrote the package while the probe read it; probe a copy nothing writes to",
    )


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
