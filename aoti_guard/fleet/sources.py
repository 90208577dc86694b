"""Reading report files from the fleet: bounded, never following a link, never trusting a size.

Reports arrive from many nodes over a shared folder or an object store: any of them may be cut off
(a node that died while writing), corrupt, huge, or a symlink planted to make us read something
else. Each file is opened with O_NOFOLLOW and O_NONBLOCK (a FIFO must not hang the run), must be a
regular file, and is read up to ``max_bytes`` + 1: a larger one is refused without reading on.
A bad file is a node *without a verdict*; only a user's mistake (no such path) raises.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from aoti_guard.fleet.classes import NodeResult, node_result, unreadable
from runtime_probe.reporting.errors import UsageError

__all__ = ["Limits", "read_report", "report_files"]


@dataclass(frozen=True)
class Limits:
    """How much of the fleet one ``fleet report`` reads (a probe report is 5 to 100 KB)."""

    max_bytes: int = 8 * 1024 * 1024  # one report
    max_files: int = 100_000  # per run: 100 times the 1,000-node plan (docs/fleet.md)


def report_files(paths: Iterable[str], limits: Limits) -> Iterator[str]:
    """The report files the arguments name: files as given, folders' ``*.json`` (one level, sorted;
    a folder's symlinks are listed, then refused when read). Raises UsageError for a missing path
    or more than ``max_files``."""
    count = 0
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise UsageError(
                f"no report at {path} ({exc.strerror})",
                hint="give report files or a folder of them (e.g. the --reports folder of fleet slurm)",
            ) from None
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as it:
                    names = sorted(e.name for e in it if e.name.endswith(".json") and not e.name.startswith("."))
            except OSError as exc:
                raise UsageError(f"cannot list the report folder {path} ({exc.strerror})") from None
            found = [os.path.join(path, n) for n in names]
        else:
            found = [path]
        for f in found:
            count += 1
            if count > limits.max_files:
                raise UsageError(f"more than {limits.max_files} report files", hint="aggregate a folder per rollout, or raise --max-files")
            yield f


def read_report(path: str, limits: Limits) -> NodeResult:
    """One report file as a node's verdict; a file that cannot give one is ``no_verdict``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os.path.islink(path):
            return unreadable(path, "a symlink (refused: a report is a regular file the node wrote)")
        return unreadable(path, f"cannot open it ({exc.strerror})")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return unreadable(path, "not a regular file (a FIFO, device or folder)")
        if st.st_size > limits.max_bytes:
            return unreadable(path, f"{st.st_size} bytes, over the {limits.max_bytes}-byte limit for one report (--max-bytes)")
        chunks, size = [], 0
        while size <= limits.max_bytes:  # the size stat gave may lie (a file still growing)
            chunk = os.read(fd, min(1 << 20, limits.max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return unreadable(path, f"cannot read it ({exc.strerror})")
    finally:
        os.close(fd)
    if size > limits.max_bytes:
        return unreadable(path, f"grew past the {limits.max_bytes}-byte limit while being read")
    raw = b"".join(chunks)
    if not raw.strip():
        return unreadable(path, "empty (the node wrote nothing: it died, or its disk was full)")
    try:
        text = raw.decode("utf-8")  # as the node wrote it; json.loads(bytes) would guess UTF-16/32
    except UnicodeDecodeError:
        return unreadable(path, "not UTF-8 text")
    try:
        data = json.loads(text)
    except RecursionError:
        return unreadable(path, "JSON nested too deeply")
    except ValueError as exc:
        return unreadable(path, f"not valid JSON, truncated or corrupt ({exc})")
    return node_result(data, path)
