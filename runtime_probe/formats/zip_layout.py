"""Byte-level checks of a zip's layout: is there exactly one way to read it, at a bounded cost?

Python's zipfile and torch's loader (miniz) read the same central directory but locate it
differently: zipfile trusts the end record's *position* (it silently shifts every offset when
bytes were prepended), miniz trusts the *offsets* written in it; for zip64, zipfile ignores the
locator's offset that miniz follows. A crafted file can therefore show the probe one set of
entries and torch another. Overlapping entries are the other trick (one body shared by many
entries: the "better zip bomb"), which Python 3.11's zipfile does not detect. So before trusting
anything the zip says, require the layout every normal writer (torch, zipfile) produces: the
archive starts at byte 0, the central directory sits where the end record says, nothing follows
the end record, local headers agree with the central directory, no two entries overlap, and no
byte between them belongs to none (but an entry's data descriptor): a hole there is a place to
hide a second archive, or gigabytes that a reader would copy before checking anything.

The end record is read first, before zipfile parses the central directory, so that a directory
declaring millions of entries is refused without building millions of objects.
"""

from __future__ import annotations

import itertools
import struct
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["End", "EndProblem", "layout_problems", "read_end"]

_EOCD = b"PK\x05\x06"
_EOCD64 = b"PK\x06\x06"
_LOCATOR64 = b"PK\x06\x07"
_LOCAL = b"PK\x03\x04"
_EOCD_SIZE, _LOCATOR_SIZE, _EOCD64_SIZE, _LOCAL_SIZE = 22, 20, 56, 30
# what may follow an entry's data with flag bit 3: CRC and two sizes (4 or 8 bytes each), with or
# without the PK\x07\x08 signature (torch's writer puts the 16-byte form after every entry)
_DESCRIPTOR_SIZES = frozenset({12, 16, 20, 24})
MAX_PROBLEMS = 5


@dataclass(frozen=True)
class End:
    """What the end records say: where the central directory is, how large, how many entries."""

    cd_offset: int
    cd_size: int
    entries: int


@dataclass(frozen=True)
class EndProblem:
    """``kind``: "unreadable" (no end record: truncated, not a zip) or "ambiguous"."""

    kind: str
    text: str


def read_end(fh: BinaryIO, size: int) -> End | EndProblem:
    """Read and check the end-of-archive records (and the zip64 ones when present)."""
    tail_len = min(size, _EOCD_SIZE + 0xFFFF)
    fh.seek(size - tail_len)
    tail = fh.read(tail_len)
    pos_in_tail = tail.rfind(_EOCD)
    while pos_in_tail >= 0 and len(tail) - pos_in_tail < _EOCD_SIZE:
        pos_in_tail = tail.rfind(_EOCD, 0, pos_in_tail)
    if pos_in_tail < 0:
        return EndProblem("unreadable", "has no end-of-archive record (truncated, or not a zip)")
    eocd = size - tail_len + pos_in_tail
    (_, _disk, _cd_disk, _n_disk, entries, cd_size, cd_offset, comment_len) = struct.unpack(
        "<4s4H2LH", tail[pos_in_tail : pos_in_tail + _EOCD_SIZE]
    )
    if eocd + _EOCD_SIZE + comment_len != size:
        return EndProblem("ambiguous", f"has {size - eocd - _EOCD_SIZE - comment_len} byte(s) after its end record")
    cd_end = eocd
    if eocd >= _LOCATOR_SIZE:
        fh.seek(eocd - _LOCATOR_SIZE)
        locator = fh.read(_LOCATOR_SIZE)
        if locator[:4] == _LOCATOR64:
            _, _disk64, eocd64_offset, _disks = struct.unpack("<4sLQL", locator)
            expected = eocd - _LOCATOR_SIZE - _EOCD64_SIZE
            if eocd64_offset != expected:
                return EndProblem("ambiguous", f"has a zip64 locator pointing to byte {eocd64_offset}, not to its zip64 end record")
            fh.seek(max(expected, 0))
            rec = fh.read(_EOCD64_SIZE)
            if expected < 0 or len(rec) != _EOCD64_SIZE or rec[:4] != _EOCD64:
                return EndProblem("unreadable", "has a zip64 locator but no zip64 end record")
            (_, rec_size, _vm, _vn, _d, _cdd, _nd, entries, cd_size, cd_offset) = struct.unpack("<4sQ2H2L4Q", rec)
            if rec_size != _EOCD64_SIZE - 12:
                return EndProblem("ambiguous", "has a zip64 end record carrying extra data")
            cd_end = expected
    if cd_size > cd_end:
        return EndProblem("unreadable", f"declares a central directory of {cd_size} bytes, larger than the file")
    if cd_end - cd_size != cd_offset:
        return EndProblem(
            "ambiguous",
            f"records its central directory at byte {cd_offset} but it sits at byte {cd_end - cd_size} "
            "(bytes were added before or inside the archive)",
        )
    return End(cd_offset, cd_size, entries)


def layout_problems(fh: BinaryIO, infos: Sequence[zipfile.ZipInfo], end: End) -> list[str]:
    """What makes the entries' layout ambiguous (empty when nothing does)."""
    problems: list[str] = []
    spans: list[tuple[int, int, str, bool]] = []  # header, end of data, name, a data descriptor follows
    for info in sorted(infos, key=lambda i: i.header_offset):
        fh.seek(info.header_offset)
        header = fh.read(_LOCAL_SIZE)
        if len(header) != _LOCAL_SIZE or header[:4] != _LOCAL:
            problems.append(f"entry {info.filename[:120]!r} has no local header at byte {info.header_offset}")
        else:
            name_len, extra_len = struct.unpack("<2H", header[26:30])
            raw_name = fh.read(name_len)
            if raw_name != info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437", "replace"):
                problems.append(f"entry {info.filename[:120]!r} carries another name in its local header")
            elif (differs := _local_disagrees(header, info)) is not None:
                problems.append(f"entry {info.filename[:120]!r} has another {differs} in its local header")
            end_of_data = info.header_offset + _LOCAL_SIZE + name_len + extra_len + info.compress_size
            spans.append((info.header_offset, end_of_data, info.filename, bool(info.flag_bits & 0x8)))
        if len(problems) >= MAX_PROBLEMS:
            return problems
    if spans and spans[0][0] != 0:
        problems.append(f"starts with {spans[0][0]} byte(s) that belong to no entry")
    # each entry against the next one, the last against the central directory
    for (_, end_of_data, name, described), (start, _, other, _) in itertools.pairwise([*spans, (end.cd_offset, 0, "", False)]):
        gap = start - end_of_data
        if gap < 0:
            problems.append(
                f"has overlapping entries {name[:120]!r} and {other[:120]!r}"
                if other
                else "has an entry that runs into its central directory"
            )
        elif gap and gap not in (_DESCRIPTOR_SIZES if described else ()):
            problems.append(
                f"has {gap} byte(s) before {f'entry {other[:120]!r}' if other else 'its central directory'} that belong to no entry"
            )
        if len(problems) >= MAX_PROBLEMS:
            return problems
    return problems


def _local_disagrees(header: bytes, info: zipfile.ZipInfo) -> str | None:
    """Which field of a local header contradicts the central directory, or None.

    Readers that stream a zip (and some extractors) trust the local header, zipfile and miniz the
    central directory: flags (encryption, data descriptor), method, CRC and sizes must say the same
    in both. With a data descriptor (flag bit 3) the local CRC and sizes are zeros by design, and a
    zip64 entry writes 0xFFFFFFFF there and its sizes in an extra field.
    """
    flags, method, _time, _date, crc, compressed, size = struct.unpack("<2H2H3L", header[6:26])
    if flags != info.flag_bits:
        return f"flag word (0x{flags:04x}, the directory says 0x{info.flag_bits:04x})"
    if method != info.compress_type:
        return f"compression method ({method}, the directory says {info.compress_type})"
    if flags & 0x8:
        return None
    if crc != info.CRC:
        return f"CRC (0x{crc:08x}, the directory says 0x{info.CRC:08x})"
    for what, local, central in (("compressed size", compressed, info.compress_size), ("size", size, info.file_size)):
        if local != 0xFFFFFFFF and local != central:
            return f"{what} ({local}, the directory says {central})"
    return None
