"""Archive checks on hand-made zips: each unsafe layout is a finding, never an exception."""

from __future__ import annotations

import hashlib
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from runtime_probe.package.archive import Limits, check_hashes, open_archive
from runtime_probe.reporting.errors import UsageError
from tests.hostile.zipcraft import Raw, central_header, end_record, local_header


def make(path: Path, entries: list[tuple[str, bytes]], *, symlink: str | None = None, deflate: bool = False) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            if name == symlink:
                info.create_system = 3
                info.external_attr = 0o120777 << 16
            info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            zf.writestr(info, data)
    return path


GOOD = [("m/archive_format", b"pt2"), ("m/data/aotinductor/model/a.so", b"\x7fELF...")]


def codes(findings: list) -> list[str]:  # type: ignore[type-arg]
    return [f.code for f in findings]


def test_good_archive(tmp_path: Path) -> None:
    archive, findings = open_archive(make(tmp_path / "g.pt2", GOOD))
    assert archive is not None and findings == []
    assert archive.root == "m" and archive.models() == ["model"]
    assert archive.read("archive_format", max_bytes=10) == b"pt2"


@pytest.mark.parametrize(
    "name",
    ["m/../evil.so", "/abs/evil.so", "m/./x", "m//x", "m\\x.so", "other/x.so", "top.so"],
)
def test_unsafe_names(tmp_path: Path, name: str) -> None:
    archive, findings = open_archive(make(tmp_path / "u.pt2", [*GOOD, (name, b"x")]))
    assert "archive.unsafe_entry" in codes(findings)
    assert archive is None or name not in {e.name for e in archive.entries.values()}


def test_symlink_and_duplicate(tmp_path: Path) -> None:
    _, findings = open_archive(make(tmp_path / "s.pt2", [*GOOD, ("m/link.so", b"/etc/passwd")], symlink="m/link.so"))
    assert any("symbolic link" in f.message for f in findings)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name it writes
        _, findings = open_archive(make(tmp_path / "d.pt2", [*GOOD, ("m/data/aotinductor/model/a.so", b"other")]))
    assert any("appears twice" in f.message for f in findings)


def test_zip_bomb_is_refused(tmp_path: Path) -> None:
    bomb = make(tmp_path / "b.pt2", [*GOOD, ("m/bomb", b"\0" * (20 * 1024 * 1024))], deflate=True)
    _, findings = open_archive(bomb, Limits(max_ratio=100))
    assert "archive.too_large" in codes(findings)


@pytest.mark.parametrize("cut", [0, 10, 100, -22, -1])
def test_truncated_or_garbage(tmp_path: Path, cut: int) -> None:
    data = make(tmp_path / "t.pt2", GOOD).read_bytes()
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(data[:cut] if cut else b"garbage")
    archive, findings = open_archive(bad)
    assert archive is None and codes(findings) == ["archive.unreadable"]


def test_missing_file_is_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        open_archive(tmp_path / "nope.pt2")
    with pytest.raises(UsageError):
        open_archive(tmp_path)


def test_hashes(tmp_path: Path) -> None:
    path = make(tmp_path / "h.pt2", [*GOOD, ("m/extra.bin", b"added later")])
    archive, _ = open_archive(path)
    assert archive is not None
    good = {rel: hashlib.sha256(data).hexdigest() for name, data in GOOD for rel in [name.split("/", 1)[1]]}
    findings = check_hashes(archive, good)
    assert [f.message for f in findings] == ["entry extra.bin is not listed in the manifest"]
    wrong = {**good, "archive_format": "0" * 64, "gone.so": "1" * 64, "extra.bin": hashlib.sha256(b"added later").hexdigest()}
    messages = " ".join(f.message for f in check_hashes(archive, wrong))
    assert "archive_format does not match" in messages and "gone.so listed in the manifest is missing" in messages


def test_unsupported_zip_version_is_a_finding(tmp_path: Path) -> None:
    """Found by the property tests: zipfile raises NotImplementedError for a newer 'version needed'."""
    data = bytearray(make(tmp_path / "v.pt2", GOOD).read_bytes())
    cd = bytes(data).find(b"PK\x01\x02")
    data[cd + 6] = 64  # version needed to extract: 6.4
    bad = tmp_path / "v64.pt2"
    bad.write_bytes(bytes(data))
    archive, findings = open_archive(bad)
    assert archive is None and codes(findings) == ["archive.unreadable"]


def test_bytes_around_the_archive_are_ambiguous(tmp_path: Path) -> None:
    data = make(tmp_path / "g.pt2", GOOD).read_bytes()
    for name, blob in {"pre": b"#!/bin/sh\n" + data, "post": data + b"junk", "twice": data + data}.items():
        path = tmp_path / f"{name}.pt2"
        path.write_bytes(blob)
        archive, findings = open_archive(path)
        assert archive is None and codes(findings) == ["archive.ambiguous"], name


def test_findings_per_entry_are_capped(tmp_path: Path) -> None:
    entries = [*GOOD, *((f"m/../x{i}", b"x") for i in range(50))]
    _, findings = open_archive(make(tmp_path / "many.pt2", entries))
    assert len(findings) == 21 and findings[-1].message.startswith("... and 30 more")


def test_many_roots_are_counted_in_linear_time(tmp_path: Path) -> None:
    import time

    path = make(tmp_path / "roots.pt2", [(f"r{i}/x", b"") for i in range(20_000)])
    started = time.monotonic()
    _, findings = open_archive(path)
    assert time.monotonic() - started < 10
    assert "archive.unsafe_entry" in codes(findings)


@pytest.mark.parametrize(
    ("field", "offset", "value", "says"),
    [
        ("encryption flag", 6, b"\x01\x00", "flag word"),
        ("method", 8, b"\x08\x00", "compression method"),
        ("crc", 14, b"\xde\xad\xbe\xef", "CRC"),
        ("size", 22, b"\x02\x00\x00\x00", "size"),
    ],
)
def test_a_local_header_that_contradicts_the_directory_is_ambiguous(
    field: str, offset: int, value: bytes, says: str, tmp_path: Path
) -> None:
    """A streaming reader trusts local headers, zipfile and miniz the directory: a byte flipped in a
    local header's flags once passed the probe (zipfile reads the directory's copy)."""
    source = make(tmp_path / "g.pt2", GOOD)
    data = bytearray(source.read_bytes())
    at = zipfile.ZipFile(source).getinfo("m/data/aotinductor/model/a.so").header_offset
    data[at + offset : at + offset + len(value)] = value
    bad = tmp_path / f"{field}.pt2"
    bad.write_bytes(bytes(data))
    archive, findings = open_archive(bad)
    assert archive is None and codes(findings) == ["archive.ambiguous"], field
    assert f"has another {says}" in findings[0].message and "a.so" in findings[0].message


def test_local_headers_with_a_data_descriptor_match_their_directory(tmp_path: Path) -> None:
    """zipfile writing to an unseekable stream (and torch's writer) leaves the local CRC and sizes
    zero and sets flag bit 3: that is agreement, not a contradiction."""

    class Unseekable:
        def __init__(self) -> None:
            self.buf = bytearray()

        def write(self, b: bytes) -> int:
            self.buf += b
            return len(b)

        def flush(self) -> None:
            pass

    sink = Unseekable()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_STORED) as zf:  # type: ignore[arg-type]
        for name, blob in GOOD:
            zf.writestr(name, blob)
    path = tmp_path / "streamed.pt2"
    path.write_bytes(bytes(sink.buf))
    assert all(i.flag_bits & 0x8 for i in zipfile.ZipFile(path).infolist())
    archive, findings = open_archive(path)
    assert archive is not None and findings == []


def _with_gap(after: int, gap: bytes) -> bytes:
    """GOOD as stored entries with ``gap`` after entry ``after`` (the last: before the directory)."""
    entries = [Raw(name, data) for name, data in GOOD]
    out, offsets = bytearray(), []
    for i, e in enumerate(entries):
        offsets.append(len(out))
        out += local_header(e) + e.data
        if i == after:
            out += gap
    cd_offset = len(out)
    for e, offset in zip(entries, offsets):
        out += central_header(e, offset)
    return bytes(out + end_record(len(entries), len(out) - cd_offset, cd_offset))


@pytest.mark.parametrize(("after", "before"), [(0, "entry 'm/data/aotinductor/model/a.so'"), (1, "its central directory")])
def test_bytes_between_entries_that_belong_to_none_are_ambiguous(tmp_path: Path, after: int, before: str) -> None:
    # a hole is where a second archive hides, or gigabytes a reader copies before checking anything
    path = tmp_path / "gap.pt2"
    path.write_bytes(_with_gap(after, b"PK\x03\x04 hidden"))
    archive, findings = open_archive(path)
    assert archive is None and codes(findings) == ["archive.ambiguous"]
    assert f"has 11 byte(s) before {before} that belong to no entry" in findings[0].message


def test_a_data_descriptor_is_the_one_gap_allowed(tmp_path: Path) -> None:
    entries = [Raw(name, data, flags=0x808) for name, data in GOOD]  # torch's writer: bit 3 on every entry
    out, offsets = bytearray(), []
    for e in entries:
        offsets.append(len(out))
        out += local_header(e) + e.data + b"PK\x07\x08" + struct.pack("<3L", zlib.crc32(e.data), len(e.data), len(e.data))
    cd_offset = len(out)
    for e, offset in zip(entries, offsets):
        out += central_header(e, offset)
    path = tmp_path / "dd.pt2"
    path.write_bytes(bytes(out + end_record(len(entries), len(out) - cd_offset, cd_offset)))
    archive, findings = open_archive(path)
    assert archive is not None and not findings
    archive.close()
