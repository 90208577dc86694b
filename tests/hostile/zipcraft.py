"""A minimal zip writer for crafted archives that zipfile refuses to write (overlapping entries,
lying sizes, end records that point elsewhere). Only stored entries, no zip64 unless asked."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

LOCAL = "<4s5H3L2H"  # 30 bytes
CENTRAL = "<4s6H3L5H2L"  # 46 bytes
EOCD = "<4s4H2LH"  # 22 bytes


@dataclass(frozen=True)
class Raw:
    """One entry: its name, the bytes stored, and optional lies for the headers."""

    name: str
    data: bytes
    method: int = 0
    declared_size: int | None = None  # the uncompressed size the headers claim
    flags: int = 0x800  # UTF-8 names
    external_attr: int = 0o644 << 16


def local_header(e: Raw) -> bytes:
    name = e.name.encode()
    size = len(e.data) if e.declared_size is None else e.declared_size
    crc = zlib.crc32(e.data) if e.method == 0 else 0
    return struct.pack(LOCAL, b"PK\x03\x04", 20, e.flags, e.method, 0, 0x21, crc, len(e.data), size, len(name), 0) + name


def central_header(e: Raw, offset: int) -> bytes:
    name = e.name.encode()
    size = len(e.data) if e.declared_size is None else e.declared_size
    crc = zlib.crc32(e.data) if e.method == 0 else 0
    return (
        struct.pack(
            CENTRAL,
            b"PK\x01\x02",
            0x0314,
            20,
            e.flags,
            e.method,
            0,
            0x21,
            crc,
            len(e.data),
            size,
            len(name),
            0,
            0,
            0,
            0,
            e.external_attr,
            offset,
        )
        + name
    )


def end_record(entries: int, cd_size: int, cd_offset: int, comment: bytes = b"") -> bytes:
    n = min(entries, 0xFFFF)
    return struct.pack(EOCD, b"PK\x05\x06", 0, 0, n, n, cd_size, cd_offset, len(comment)) + comment


def build(entries: list[Raw], *, prefix: bytes = b"", central: list[tuple[Raw, int]] | None = None) -> bytes:
    """Local records after ``prefix`` (offsets counted from byte 0 of the file), then a central
    directory: one record per entry, or ``central`` as given (entry, offset) to make lies."""
    out = bytearray(prefix)
    offsets = []
    for e in entries:
        offsets.append(len(out))
        out += local_header(e) + e.data
    cd_offset = len(out)
    records = central if central is not None else list(zip(entries, offsets))
    for e, off in records:
        out += central_header(e, off)
    out += end_record(len(records), len(out) - cd_offset, cd_offset)
    return bytes(out)
