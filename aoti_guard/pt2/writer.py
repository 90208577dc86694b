"""Assembling the one .pt2: torch's release package, plus golden samples, the twin and the manifest.

torch writes the release model (``package_aoti``) so that its own loader reads it unchanged; we
append our entries to that zip (stored, same root folder) instead of rewriting it, so large .so
files are never copied twice.
"""

from __future__ import annotations

import hashlib
import threading
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from runtime_probe.package.archive import open_archive
from runtime_probe.runtime import layout

__all__ = [
    "EntryHashes",
    "append_entries",
    "copy_entries",
    "copy_twin",
    "entry_info",
    "hash_entries",
    "package_release",
    "replace_entries",
    "sha256_bytes",
    "zip_root",
]

_CHUNK = 1024 * 1024


def package_release(path: str, files: list[Any], model_name: str = layout.RELEASE_MODEL) -> None:
    from runtime_probe.runtime.torch_compat import package_aoti

    package_aoti()(path, {model_name: files})


def zip_root(path: str) -> str:
    with zipfile.ZipFile(path) as zf:
        return zf.namelist()[0].split("/", 1)[0]


def entry_info(name: str) -> zipfile.ZipInfo:
    """A stored entry with a fixed date and mode 0644: the same bytes on every build."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def append_entries(path: str, entries: Iterable[tuple[str, bytes]]) -> None:
    root = zip_root(path)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for rel, data in entries:
            zf.writestr(entry_info(f"{root}/{rel}"), data)


def copy_entries(src: str, out: zipfile.ZipFile, skip: Iterable[str] = ()) -> None:
    """Copy every entry of the zip ``src`` into ``out`` but those named in ``skip`` (full names,
    root included), each with its name, date, attributes and bytes: torch's loader and the
    manifest's hashes see the same entries as in ``src``."""
    skipped = set(skip)
    with zipfile.ZipFile(src) as zin:
        for info in zin.infolist():
            if info.filename in skipped:
                continue
            copy = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            copy.compress_type = info.compress_type
            copy.external_attr = info.external_attr
            copy.create_system = info.create_system
            copy.comment = info.comment
            copy.file_size = info.file_size  # lets zipfile choose zip64 headers up front
            if info.is_dir():
                out.writestr(copy, b"")
                continue
            with zin.open(info) as fin, out.open(copy, "w") as fout:
                while chunk := fin.read(_CHUNK):
                    fout.write(chunk)


def replace_entries(src: str, dst: str, entries: Sequence[tuple[str, bytes]], drop: Iterable[str] = ()) -> None:
    """Write ``dst``: every entry of ``src`` but ``drop`` and those ``entries`` replace (names
    relative to the root), copied as they are, then ``entries`` appended in order (the manifest
    last, as a build writes it). ``dst`` is written in place: give a temporary name and move it."""
    root = zip_root(src)
    skip = {f"{root}/{rel}" for rel in [*drop, *(rel for rel, _ in entries)]}
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED, allowZip64=True) as out:
        copy_entries(src, out, skip)
        for rel, data in entries:
            out.writestr(entry_info(f"{root}/{rel}"), data)


def copy_twin(twin_pt2: str, dest: str, twin_model: str, prefix: str) -> dict[str, str]:
    """Copy the twin's model files into ``dest`` under ``prefix``; returns each new entry's
    SHA-256, computed on the way (the twin's .so holds a second copy of the weights: GBs that
    ``hash_entries`` then need not read again)."""
    root = zip_root(dest)
    src_dir = layout.model_dir(twin_model)
    written: dict[str, str] = {}
    with zipfile.ZipFile(twin_pt2) as src, zipfile.ZipFile(dest, "a", zipfile.ZIP_STORED, allowZip64=True) as out:
        for info in src.infolist():
            rel = info.filename.split("/", 1)[1] if "/" in info.filename else info.filename
            if not rel.startswith(src_dir) or info.is_dir():
                continue
            new_rel = prefix + rel[len(src_dir) :]
            digest = hashlib.sha256()
            with src.open(info) as fin, out.open(entry_info(f"{root}/{new_rel}"), "w", force_zip64=True) as fout:
                while chunk := fin.read(_CHUNK):
                    fout.write(chunk)
                    digest.update(chunk)
            written[new_rel] = digest.hexdigest()
    return written


def hash_entries(path: str, known: Mapping[str, str] | None = None) -> dict[str, str]:
    """SHA-256 of every entry but the manifest and its signature; ``known``: hashes computed as
    those entries were written (``copy_twin``), taken as they are."""
    archive, findings = open_archive(path)
    if archive is None or findings:
        raise RuntimeError(f"the package just written is not a clean archive: {[f.message for f in findings]}")
    known = known or {}
    with archive:
        return {rel: known.get(rel) or archive.sha256(rel) for rel in sorted(archive.entries) if rel not in layout.UNHASHED}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# An entry as the zip's directory places it: where its header is, its stored size, its CRC-32.
_Placed = tuple[int, int, int]


class EntryHashes:
    """The SHA-256 of a package's entries, computed in a thread while the build goes on.

    The release package is complete once it compiles, and only appended to after that; hashing its
    entries (at full size GBs of weights: llama's package phase was 13 s, most of it this) can
    overlap validation instead of following it. ``known(path)`` gives the hashes of the entries
    still where and as they were hashed (offset, size and CRC-32 in the zip's directory), for
    ``hash_entries``'s ``known``; anything else is hashed again there, so a failure here (or a
    changed entry) costs time, never a wrong hash. hashlib and file reads release the GIL."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._hashed: dict[str, tuple[_Placed, str]] = {}
        self.error: str | None = None
        self.hashed_bytes = 0  # what the thread read
        self.waited_s: float | None = None  # how long ``known`` waited for it (the package phase's detail)
        self.used = 0  # how many of its hashes ``known`` handed on
        self._thread = threading.Thread(target=self._run, name="aoti-guard-entry-hashes", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            archive, findings = open_archive(self._path)  # the reader hash_entries uses: the same entries, the same bytes
            if archive is None or findings:
                raise RuntimeError(f"not a clean archive: {[f.message for f in findings]}")
            with archive:
                for rel in sorted(archive.entries):
                    if rel not in layout.UNHASHED:
                        self._hashed[rel] = (archive.placement(rel), archive.sha256(rel))
                        self.hashed_bytes += archive.entries[rel].size
        except Exception as exc:  # noqa: BLE001 - a head start only: hash_entries hashes whatever is missing
            self.error = f"{type(exc).__name__}: {exc}"
            self._hashed = {}

    def known(self, path: str) -> dict[str, str]:
        """Wait for the thread; the hashes of the entries of ``path`` that are unchanged since.
        Call it before appending to the package: the thread may still be reading its directory."""
        started = time.monotonic()
        self._thread.join()
        self.waited_s = round(time.monotonic() - started, 3)
        if not self._hashed:
            return {}
        out: dict[str, str] = {}
        archive, _ = open_archive(path)
        if archive is None:
            return {}
        with archive:
            for rel, (placed, digest) in self._hashed.items():
                if rel in archive.entries and archive.placement(rel) == placed:
                    out[rel] = digest
        self.used = len(out)
        return out

    def detail(self) -> dict[str, object]:
        """For the package phase's report: what was hashed early, and how long the phase waited."""
        out: dict[str, object] = {"entries": self.used, "bytes": self.hashed_bytes, "waited_s": self.waited_s}
        if self.error is not None:
            out["error"] = self.error[:200]
        return out
