"""Archive checks that run BEFORE any native code is opened: a safe zip, a root folder, hashes.

A .pt2 is a zip whose entries all sit under one root folder. Everything here reads the zip with
the standard library only; nothing is extracted to disk except by ``extract_entries``.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import BinaryIO

from runtime_probe.formats.zip_layout import EndProblem, layout_problems, read_end
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.escaping import for_terminal
from runtime_probe.reporting.findings import Finding, error
from runtime_probe.runtime import layout

__all__ = [
    "READ_ERRORS",
    "Archive",
    "Entry",
    "Limits",
    "check_hashes",
    "check_in_place",
    "file_digest",
    "open_archive",
    "open_package_file",
    "sha256_file",
    "unsafe_name",
]

PHASE = "archive"
_CHUNK = 1024 * 1024
MAX_ENTRY_FINDINGS = 20
# What reading a damaged entry can raise (bad CRC, corrupt deflate stream, short file...): a
# finding for the caller, never a traceback.
READ_ERRORS = (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, NotImplementedError, RuntimeError)


@dataclass(frozen=True)
class Limits:
    """Zip-bomb guards. AOTI packages are stored (not compressed), so ratios stay near 1."""

    max_entries: int = 100_000
    max_directory_bytes: int = 32 * 1024**2  # ~150,000 entries of torch-length names
    max_entry_bytes: int = 64 * 1024**3
    max_total_bytes: int = 256 * 1024**3
    max_ratio: float = 200.0  # uncompressed / compressed, for compressed entries


@dataclass(frozen=True)
class Entry:
    name: str  # full name in the zip
    rel: str  # relative to the root folder
    size: int
    compressed_size: int
    method: int


class Archive:
    """A validated view of a .pt2 zip. Build it with ``open_archive``."""

    def __init__(
        self, path: str, zf: zipfile.ZipFile, root: str, entries: dict[str, Entry], fh: BinaryIO, *, owns_file: bool = True
    ) -> None:
        self.path = path  # names the file in messages; every read goes through ``fh``
        self._zf = zf
        self._fh = fh  # the one descriptor everything was checked and is read through
        self._owns_file = owns_file
        self.root = root
        self.entries = entries

    def close(self) -> None:
        self._zf.close()
        if self._owns_file:
            self._fh.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def has(self, rel: str) -> bool:
        return rel in self.entries

    def models(self) -> list[str]:
        """AOTI model names, as torch's loader would find them."""
        names = {e.rel[len(layout.AOTI_DIR) :].split("/", 1)[0] for e in self.entries.values() if e.rel.startswith(layout.AOTI_DIR)}
        return sorted(n for n in names if n)

    def model_files(self, model_name: str) -> list[Entry]:
        prefix = layout.model_dir(model_name)
        return [e for e in self.entries.values() if e.rel.startswith(prefix)]

    def under(self, prefix: str) -> list[Entry]:
        return [e for e in self.entries.values() if e.rel.startswith(prefix)]

    def read(self, rel: str, *, max_bytes: int) -> bytes:
        """Read a whole entry, refusing one larger than ``max_bytes`` (declared or actual)."""
        entry = self.entries[rel]
        if entry.size > max_bytes:
            raise ValueError(f"{rel} is {entry.size} bytes, over the {max_bytes} limit")
        with self._zf.open(entry.name) as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"{rel} holds more than its declared size")
        return data

    def placement(self, rel: str) -> tuple[int, int, int]:
        """Where the zip's directory puts the entry: (header offset, stored size, CRC-32). An entry
        with the same placement in a later read of the file (one only appended to) is the same bytes."""
        info_ = self._zf.getinfo(self.entries[rel].name)
        return info_.header_offset, info_.compress_size, info_.CRC

    def stored_span(self, rel: str) -> tuple[int, int] | None:
        """(file offset, size) of a stored (uncompressed) entry's bytes, for zero-copy reads."""
        entry = self.entries[rel]
        if entry.method != zipfile.ZIP_STORED:
            return None
        info_ = self._zf.getinfo(entry.name)
        # the descriptor that was checked, not the path again: it may name another file by now
        header = os.pread(self._fh.fileno(), 30, info_.header_offset)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            return None
        name_len = int.from_bytes(header[26:28], "little")
        extra_len = int.from_bytes(header[28:30], "little")
        return info_.header_offset + 30 + name_len + extra_len, entry.size

    def view(self, rel: str, *, max_bytes: int = 1 << 34) -> memoryview | bytes:
        """The entry's bytes: an mmap view for stored entries (no copy), else a bounded read."""
        span = self.stored_span(rel)
        if span is None:
            return self.read(rel, max_bytes=max_bytes)
        import mmap

        offset, size = span
        mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        if offset + size > len(mm):
            raise ValueError(f"{rel} runs past the end of the file")
        return memoryview(mm)[offset : offset + size]

    def iter_chunks(self, rel: str) -> Iterator[bytes]:
        with self._zf.open(self.entries[rel].name) as fh:
            while chunk := fh.read(_CHUNK):
                yield chunk

    def check_readable(self) -> list[Finding]:
        """Read every entry to its end, so zipfile checks its CRC and size: all a package without
        hashes can prove before native code opens it (torch's extractor would fail later, or not)."""
        findings: list[Finding] = []
        for rel in sorted(self.entries):
            try:
                for _ in self.iter_chunks(rel):
                    pass
            except READ_ERRORS as exc:
                findings.append(
                    error(
                        "archive.unreadable",
                        PHASE,
                        f"entry {rel[:200]} cannot be read: {str(exc)[:200]}",
                        hint="the file is corrupted; copy it again",
                    )
                )
                if len(findings) >= MAX_ENTRY_FINDINGS:
                    break
        return findings

    def sha256(self, rel: str) -> str:
        h = hashlib.sha256()
        for chunk in self.iter_chunks(rel):
            h.update(chunk)
        return h.hexdigest()

    def extract_entries(self, entries: Iterable[tuple[str, str]], dest_zip: str, *, markers_from_root: bool = True) -> None:
        """Write a new stored zip at ``dest_zip`` holding ``(source rel, new rel)`` pairs, under the
        same root folder, plus torch's archive markers (so torch's loader accepts it)."""
        pairs = list(entries)
        if markers_from_root:
            pairs += [(m, m) for m in layout.TORCH_MARKERS if m in self.entries]
        with zipfile.ZipFile(dest_zip, "w", zipfile.ZIP_STORED, allowZip64=True) as out:
            for src, dst in pairs:
                info_ = zipfile.ZipInfo(f"{self.root}/{dst}", date_time=(1980, 1, 1, 0, 0, 0))
                info_.compress_type = zipfile.ZIP_STORED
                with self._zf.open(self.entries[src].name) as fin, out.open(info_, "w", force_zip64=True) as fout:
                    while chunk := fin.read(_CHUNK):
                        fout.write(chunk)


def unsafe_name(name: str) -> str | None:
    """Why an entry name is unsafe to have in a package, or None."""
    if not name or "\x00" in name:
        return "has an empty name or a NUL byte"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if "\\" in name:
        return "contains a backslash"
    parts = name.rstrip("/").split("/")
    if any(p in ("..", ".") for p in parts) or any(p == "" for p in parts):
        return "has a '..', '.' or empty path component"
    return None


def open_archive(
    path: str | os.PathLike[str], limits: Limits = Limits(), *, fh: BinaryIO | None = None
) -> tuple[Archive | None, list[Finding]]:
    """Open ``path`` as a .pt2 and check it is safe to read; returns (archive or None, findings).

    An archive is returned when it is readable and has a root folder, even with unsafe entries
    (those are excluded from ``entries`` and reported), so later phases can still say more. The
    file is opened once (``open_package_file``): every check and every later read of the archive
    goes through that descriptor. ``fh``: the file already open that way (``path`` then only
    names it); it stays the caller's to close.

    Raises:
        UsageError: the path does not exist or is not a regular file.
    """
    fspath = os.fspath(path)
    owned = fh is None
    handle = open_package_file(fspath) if fh is None else fh
    findings: list[Finding] = []
    try:
        size = os.fstat(handle.fileno()).st_size  # of the file opened, whatever the path names by now
        opened = _open_zip(handle, os.path.basename(fspath), size, limits, findings)
        if opened is None:
            archive = None
        else:
            zf, infos = opened
            root = _root(infos)
            if root:
                archive = Archive(fspath, zf, root, _entries(infos, root, limits, findings), handle, owns_file=owned)
            else:
                findings.append(_no_root())
                zf.close()
                archive = None
    except BaseException:
        if owned:
            handle.close()
        raise
    if archive is None and owned:
        handle.close()
    return archive, findings


def open_package_file(path: str) -> BinaryIO:
    """``path`` opened once for reading: without waiting on a FIFO (O_NONBLOCK), checked to be a
    regular file through that descriptor (a FIFO, device or folder is refused, never read).

    Raises:
        UsageError: the path does not exist, cannot be opened, or is not a regular file.
    """
    shown = for_terminal(path)  # a file name can hold ESC or a newline too
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(f"no such package: {shown}", hint="check the path; a package is a .pt2 file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {shown}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{shown} is not a regular file", hint="pass the .pt2 file, not a folder, FIFO or device")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def file_digest(fh: BinaryIO) -> tuple[int, str]:
    """(bytes, SHA-256) of the whole file open as ``fh``, read by offset (its position is left
    alone). Hashing the descriptor that is parsed, not the path again, pairs the digest with what
    was read: under an atomic writer, a second open of the path gave another version's sha256
    beside this one's manifest (issue 40).

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fh.fileno(), _CHUNK, offset):
        h.update(chunk)
        offset += len(chunk)
    return offset, h.hexdigest()


def check_in_place(fh: BinaryIO, name: str, size: int, limits: Limits = Limits()) -> list[Finding]:
    """Why ``open_archive`` would refuse the file open as ``fh`` (``size`` bytes), read in place:
    its end records, central directory and entries' layout, by seeking, never by copying. Empty
    when it would open it (its entries' own problems are left to ``open_archive``).

    The probe asks this before it copies the package: a 5 GB file that is no zip was copied whole
    before its first bytes were checked (issue 40)."""
    findings: list[Finding] = []
    opened = _open_zip(fh, name, size, limits, findings)
    if opened is None:
        return findings
    zf, infos = opened
    zf.close()  # does not close fh: zipfile leaves a file object it was given open
    return [] if _root(infos) else [_no_root()]


def _unreadable(name: str, size: int, why: str) -> Finding:
    return error(
        "archive.unreadable",
        PHASE,
        f"{name} is not a readable zip archive: {why}",
        expected="a .pt2 zip archive",
        found=f"{size} bytes that are not a complete zip",
        hint="the file may be truncated or not a package; copy it again and compare its sha256 with the release",
    )


def _no_root() -> Finding:
    return error(
        "archive.unreadable",
        PHASE,
        "archive has no root folder",
        expected="all entries under one folder (the package name)",
        found="entries at the top level",
        hint="rebuild the package with aoti-guard build or torch's aoti_compile_and_package",
    )


def _too_large(message: str, expected: str, found: str) -> Finding:
    return error("archive.too_large", PHASE, message, expected=expected, found=found, hint="this is not a package aoti-guard built")


def _open_zip(
    fh: BinaryIO, name: str, size: int, limits: Limits, findings: list[Finding]
) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]] | None:
    """The zip read from ``fh`` and its entries, once its end records, sizes and byte layout are
    unambiguous; else None with the findings that say why."""
    try:
        end = read_end(fh, size)
    except (OSError, ValueError, OverflowError, struct.error) as exc:
        end = EndProblem("unreadable", f"cannot be read: {exc}")
    if isinstance(end, EndProblem):
        findings.append(_unreadable(name, size, f"it {end.text}") if end.kind == "unreadable" else _ambiguous(end.text))
        return None
    if end.entries > limits.max_entries or end.cd_size > limits.max_directory_bytes:
        expected = f"at most {limits.max_entries} entries and {limits.max_directory_bytes} bytes"
        message = f"archive declares {end.entries} entries in a {end.cd_size}-byte central directory"
        findings.append(_too_large(message, expected, f"{end.entries} entries, {end.cd_size} bytes"))
        return None
    try:
        fh.seek(0)
        zf = zipfile.ZipFile(fh, "r")
        infos = zf.infolist()
    except (*READ_ERRORS, zipfile.LargeZipFile, OverflowError, IndexError, KeyError, struct.error) as exc:
        findings.append(_unreadable(name, size, str(exc)[:300]))
        return None
    if len(infos) > limits.max_entries:
        findings.append(_too_large(f"archive has {len(infos)} entries", f"at most {limits.max_entries}", str(len(infos))))
        zf.close()
        return None
    try:
        problems = layout_problems(fh, infos, end)
    except (OSError, ValueError, OverflowError, struct.error) as exc:
        problems = [f"cannot be read byte by byte: {exc}"]
    if problems:
        findings.extend(_ambiguous(p) for p in problems)
        zf.close()
        return None
    return zf, infos


def _root(infos: list[zipfile.ZipInfo]) -> str:
    # Counted in one pass: a zip with 100,000 entries under 100,000 roots must not cost 10**10 steps.
    per_root = Counter(i.filename.split("/", 1)[0] for i in infos if "/" in i.filename)
    return max(sorted(per_root), key=lambda r: per_root[r]) if per_root else ""


def _entries(infos: list[zipfile.ZipInfo], root: str, limits: Limits, findings: list[Finding]) -> dict[str, Entry]:
    """The safe entries by name under the root; a finding for each unsafe one (capped)."""
    entries: dict[str, Entry] = {}
    seen: set[str] = set()
    total = 0
    bad: list[Finding] = []  # per-entry problems; a hostile zip can have 100,000 of them
    for i in infos:
        name = i.filename
        if name.endswith("/") and i.file_size == 0:
            continue  # a directory record carries no data
        problem = _entry_problem(i, root, seen, limits)
        seen.add(name)
        if problem is not None:
            bad.append(problem)
            continue
        total += i.file_size
        rel = name[len(root) + 1 :]
        entries[rel] = Entry(name, rel, i.file_size, i.compress_size, i.compress_type)
    findings += bad[:MAX_ENTRY_FINDINGS]
    if len(bad) > MAX_ENTRY_FINDINGS:
        findings.append(
            error(
                bad[-1].code,
                PHASE,
                f"... and {len(bad) - MAX_ENTRY_FINDINGS} more entries like these",
                found=f"{len(bad)} bad entries",
                hint="do not load this package: it was not produced by a trusted build",
            )
        )
    if total > limits.max_total_bytes:
        findings.append(
            error(
                "archive.too_large",
                PHASE,
                f"archive expands to {total} bytes",
                expected=f"at most {limits.max_total_bytes}",
                found=str(total),
                hint="a zip bomb or a corrupted archive",
            )
        )
    return entries


def _entry_problem(i: zipfile.ZipInfo, root: str, seen: set[str], limits: Limits) -> Finding | None:
    """Why one entry cannot be part of a package (unsafe name, link, bomb...), or None."""
    name = i.filename
    why = unsafe_name(i.orig_filename)  # orig_filename keeps what follows a NUL byte
    if why is None and name in seen:
        why = "appears twice (a later copy could shadow the checked one)"
    if why is None and i.create_system == 3 and stat.S_ISLNK(i.external_attr >> 16):
        why = "is a symbolic link"
    if why is None and i.flag_bits & 0x1:
        why = "is encrypted"
    if why is None and not name.startswith(root + "/"):
        why = f"is outside the root folder {root!r}"
    if why is None and i.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        why = f"uses compression method {i.compress_type} (expected stored or deflated)"
    if why is not None:
        return error(
            "archive.unsafe_entry",
            PHASE,
            f"entry {name[:200]!r} {why}",
            expected=f"entries under {root}/ with plain relative names",
            found=name[:200],
            hint="do not load this package: it was not produced by a trusted build; rebuild it",
        )
    if i.compress_type == zipfile.ZIP_STORED and i.file_size != i.compress_size:
        return error(
            "archive.unreadable",
            PHASE,
            f"entry {name[:200]!r} is stored uncompressed but declares {i.file_size} bytes for {i.compress_size} stored",
            expected="equal sizes",
            found=f"{i.file_size} != {i.compress_size}",
            hint="the archive is corrupted or crafted; do not load it",
        )
    ratio = i.file_size / max(i.compress_size, 1)
    if i.file_size > limits.max_entry_bytes or (
        i.compress_type != zipfile.ZIP_STORED and ratio > limits.max_ratio and i.file_size > 1024 * 1024
    ):
        return error(
            "archive.too_large",
            PHASE,
            f"entry {name[:200]!r} expands to {i.file_size} bytes from {i.compress_size}",
            expected=f"at most {limits.max_entry_bytes} bytes and a ratio under {limits.max_ratio:g}",
            found=f"{i.file_size} bytes, ratio {ratio:.0f}",
            hint="a zip bomb or a corrupted archive; do not unpack it",
        )
    return None


def _ambiguous(problem: str) -> Finding:
    return error(
        "archive.ambiguous",
        PHASE,
        f"the zip {problem}",
        expected="one unambiguous layout, as torch and zipfile write it",
        found=problem[:200],
        hint="do not load this package: zip readers could disagree on what it holds; fetch the released file again",
    )


# At most this many per-entry hash findings are reported; the rest are counted in one summary
# finding. A hostile manifest listing 150k missing entries otherwise gave 56 MB of JSON.
MAX_HASH_FINDINGS = 50


def check_hashes(archive: Archive, hashes: Mapping[str, str]) -> list[Finding]:
    """Every entry's SHA-256 against the manifest; missing and unlisted entries too (capped at
    MAX_HASH_FINDINGS findings plus one that counts the rest)."""
    findings: list[Finding] = []
    total = 0
    for finding in _hash_findings(archive, hashes):  # a generator: the omitted ones are never kept
        total += 1
        if total <= MAX_HASH_FINDINGS:
            findings.append(finding)
    if total <= MAX_HASH_FINDINGS:
        return findings
    more = total - MAX_HASH_FINDINGS
    return [
        *findings,
        error(
            "archive.hash_mismatch",
            PHASE,
            f"{more} more entries are missing, unlisted or differ from the manifest (only the first {MAX_HASH_FINDINGS} are listed)",
            expected="every entry as the manifest records it",
            found=f"{total} problems in all",
            hint="the package was modified after the build; do not load it, fetch the released file again",
            evidence={"omitted": more, "total": total},
        ),
    ]


def _hash_findings(archive: Archive, hashes: Mapping[str, str]) -> Iterator[Finding]:
    for rel, expected in sorted(hashes.items()):
        if rel not in archive.entries:
            yield (
                error(
                    "archive.hash_mismatch",
                    PHASE,
                    f"entry {rel} listed in the manifest is missing",
                    expected=f"sha256 {expected[:16]}…",
                    found="no such entry",
                    hint="the package was modified after the build; use the released file",
                )
            )
            continue
        try:
            actual = archive.sha256(rel)
        except READ_ERRORS as exc:
            yield (error("archive.unreadable", PHASE, f"entry {rel} cannot be read: {exc}", hint="the file is corrupted; copy it again"))
            continue
        if actual != expected:
            yield (
                error(
                    "archive.hash_mismatch",
                    PHASE,
                    f"entry {rel} does not match its recorded SHA-256",
                    expected=expected,
                    found=actual,
                    hint="the package was modified or corrupted after the build; do not load it, fetch the released file again",
                    evidence={"entry": rel},
                )
            )
    for rel in sorted(set(archive.entries) - set(hashes) - layout.UNHASHED):
        yield (
            error(
                "archive.hash_mismatch",
                PHASE,
                f"entry {rel} is not listed in the manifest",
                expected="only entries the build recorded",
                found=rel,
                hint="something was added to the package after the build; do not load it",
                evidence={"entry": rel},
            )
        )


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()
