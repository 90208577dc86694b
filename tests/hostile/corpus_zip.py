"""Corpus cases for the zip container itself: bytes around the archive, overlapping entries,
lying end records, zip bombs (deflate ratio, lying sizes, entry counts, many roots)."""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import zipcraft

if TYPE_CHECKING:
    from .make_corpus import _Corpus

Entries = Callable[[Path], list[tuple[zipfile.ZipInfo, bytes]]]


def add_cases(c: _Corpus, entries: Entries) -> None:
    root, data = c.root, c.data
    c.add(
        "zip-prepended-script",
        "zip structure",
        b"#!/bin/sh\nexec evil\n" + data,
        "archive.ambiguous",
        "a script before the zip, offsets not adjusted",
    )
    c.add("zip-trailing-bytes", "zip structure", data + b"\0" * 100, "archive.ambiguous", "100 bytes after the end record")
    c.add("zip-two-archives", "zip structure", data + data, "archive.ambiguous", "the package twice, back to back")
    c.add("zip-not-a-zip", "zip structure", b"\x7fELF" + bytes(4000), "archive.unreadable", "an ELF header and zeros")
    c.add("zip-empty-archive", "zip structure", zipcraft.build([]), "archive.unreadable", "a zip with no entries")
    c.add(
        "zip-no-root",
        "zip structure",
        zipcraft.build([zipcraft.Raw("model.so", b"x")]),
        "archive.unreadable",
        "entries at the top level only",
    )
    inner = zipcraft.Raw(f"{root}/data/aotinductor/model/b.so", b"B" * 64)
    outer_data = zipcraft.local_header(inner) + inner.data
    outer = zipcraft.Raw(f"{root}/data/aotinductor/model/a.so", outer_data)
    a_header = zipcraft.local_header(outer)
    overlap = zipcraft.build([outer], central=[(outer, 0), (inner, len(a_header))])
    c.add("zip-overlapping-entries", "zip structure", overlap, "archive.ambiguous", "an entry stored inside another one")
    shared = zipcraft.Raw(f"{root}/data/aotinductor/model/a.so", b"\0" * 1024)
    many = [(zipcraft.Raw(shared.name, shared.data), 0)] * 50
    c.add(
        "zip-shared-body",
        "zip structure",
        zipcraft.build([shared], central=many),
        {"archive.ambiguous", "archive.unsafe_entry"},
        "50 directory records for one body",
    )
    adjusted = zipcraft.build([zipcraft.Raw(f"{root}/data/aotinductor/model/a.so", b"x")], prefix=b"MZ" + bytes(62))
    c.add("zip-prepended-adjusted", "zip structure", adjusted, "archive.ambiguous", "64 bytes before the first entry, offsets adjusted")
    local_only = bytearray(data)
    local_only[6] |= 0x1  # the first local header's flag word: encrypted, the directory says not
    c.add(
        "zip-local-header-disagrees",
        "zip structure",
        bytes(local_only),
        "archive.ambiguous",
        "the first local header flagged encrypted, its directory record not",
    )
    eocd = data.rfind(b"PK\x05\x06")
    lying = bytearray(data)
    lying[eocd + 16 : eocd + 20] = struct.pack("<L", struct.unpack("<L", data[eocd + 16 : eocd + 20])[0] + 7)
    c.add(
        "zip-cd-offset-lies",
        "zip structure",
        bytes(lying),
        {"archive.ambiguous", "archive.unreadable"},
        "the end record's directory offset off by 7",
    )
    # a zip64 end record claiming a billion entries: refused before zipfile parses anything
    loc_at = len(data[:eocd])
    z64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 10**9, 10**9, *struct.unpack("<2L", data[eocd + 12 : eocd + 20]))
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, loc_at, 1)
    end = bytearray(data[eocd:])
    end[8:12] = b"\xff\xff\xff\xff"
    c.add(
        "zip64-billion-entries",
        "zip structure",
        data[:eocd] + z64 + locator + bytes(end),
        {"archive.too_large", "archive.ambiguous"},
        "a zip64 end record declaring 10**9 entries",
    )
    _bombs(c, entries)


def _bombs(c: _Corpus, entries: Entries) -> None:
    root = c.root
    out = c.out / "tmp.pt2"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in entries(c.source):
            zf.writestr(info, data, compress_type=zipfile.ZIP_STORED)
        bomb = zipfile.ZipInfo(f"{root}/data/aotinductor/model/bomb.bin")
        bomb.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(bomb, "w") as fh:
            chunk = bytes(1 << 20)
            for _ in range(64):  # 64 MiB of zeros, ~64 KiB compressed: a ratio of 1000
                fh.write(chunk)
    c.add("zip-bomb-deflate", "zip bomb", out, "archive.too_large", "64 MiB of zeros deflated to ~64 KiB")
    payload = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = payload.compress(bytes(64 << 20)) + payload.flush()
    liar = zipcraft.Raw(f"{root}/data/aotinductor/model/liar.so", stream, method=8, declared_size=1000)
    parts = [zipcraft.Raw(f"{root}/archive_format", b"pt2"), liar]
    c.add(
        "zip-bomb-lying-size",
        "zip bomb",
        zipcraft.build(parts),
        {"archive.unreadable", "archive.hash_mismatch"},
        "64 MiB deflated, declared as 1000 bytes",
    )
    huge = zipcraft.Raw(f"{root}/data/aotinductor/model/huge.so", b"x", declared_size=0xFFFFFFFF)
    c.add(
        "zip-declared-4gib",
        "zip bomb",
        zipcraft.build([zipcraft.Raw(f"{root}/archive_format", b"pt2"), huge]),
        {"archive.unreadable", "archive.too_large", "archive.ambiguous"},
        "a 1-byte entry declared as 4 GiB",
    )
    with zipfile.ZipFile(out, "w") as zf:
        for i in range(100_001):
            zf.writestr(zipfile.ZipInfo(f"{root}/f{i}"), b"")
    c.add("zip-100001-entries", "zip bomb", out, "archive.too_large", "100,001 empty entries")
    with zipfile.ZipFile(out, "w") as zf:
        for i in range(40_000):
            zf.writestr(zipfile.ZipInfo(f"r{i}/x"), b"")
    c.add("zip-40000-roots", "zip bomb", out, "archive.unsafe_entry", "40,000 root folders (quadratic before)")
    with zipfile.ZipFile(out, "w") as zf:
        for info, data in entries(c.source):
            zf.writestr(info, data)
        zf.writestr(
            zipfile.ZipInfo(f"{root}/data/aotinductor/model/x.so", date_time=(1980, 1, 1, 0, 0, 0)), b"x", compress_type=zipfile.ZIP_BZIP2
        )
    c.add("zip-bzip2-entry", "zip structure", out, "archive.unsafe_entry", "an entry compressed with bzip2")
