"""The probe's private copy of the package and its temporary folder (issue 16 items 2 and 5)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from pathlib import Path

import pytest

from runtime_probe.package.private_copy import private_copy
from runtime_probe.probe import run as probe_run
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.reporting.errors import PackageRejected, UsageError

from .fakepkg import ENTRIES, make_package


def test_the_copy_is_private_and_byte_identical(tmp_path: Path) -> None:
    src = make_package(tmp_path / "m.pt2", entries={**ENTRIES, "data/big.bin": os.urandom(3 << 20)})
    copy = Path(private_copy(str(src), str(tmp_path / "private")))
    assert copy.read_bytes() == src.read_bytes()
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o700
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "m.pt2"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        private_copy(str(fifo), str(tmp_path / "private"))  # an open without O_NONBLOCK would hang here


def test_an_unusable_tmpdir_is_a_finding_with_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "m.pt2"
    pkg.write_bytes(b"PK")

    def read_only(*args: object, **kwargs: object) -> str:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    report = probe_run.probe(pkg)
    codes = [f.code for p in report.phases for f in p.findings]
    assert codes == ["env.tmpdir_unusable"] and report.exit_code == 3
    assert "read-only" in report.phases[0].findings[0].message


def test_a_file_that_is_no_zip_is_refused_before_anything_is_copied(tmp_path: Path) -> None:
    # issue 40: a 5 GB sparse file was copied whole (52 s, 5 GB of TMPDIR) before its end record was read
    sparse = tmp_path / "m.pt2"
    with open(sparse, "wb") as fh:
        fh.truncate(5 << 30)
    started = time.monotonic()
    with pytest.raises(PackageRejected) as info:
        private_copy(str(sparse), str(tmp_path / "private"))
    assert time.monotonic() - started < 2
    assert [f.code for f in info.value.findings] == ["archive.unreadable"]  # type: ignore[attr-defined]
    assert not (tmp_path / "private").exists()


def test_a_zip_behind_gigabytes_of_padding_is_refused_in_place(tmp_path: Path) -> None:
    small = make_package(tmp_path / "small.pt2").read_bytes()
    padded = tmp_path / "m.pt2"
    with open(padded, "wb") as fh:
        fh.truncate(2 << 30)  # a hole: costs no disk, reads as zeros
        fh.seek(2 << 30)
        fh.write(small)
    with pytest.raises(PackageRejected) as info:
        private_copy(str(padded), str(tmp_path / "private"))
    assert {f.code for f in info.value.findings} == {"archive.ambiguous"}  # type: ignore[attr-defined]
    assert not (tmp_path / "private").exists()


def test_a_read_error_is_the_packages_finding_not_the_tmpdirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = make_package(tmp_path / "m.pt2")
    real = os.pread

    def failing(fd: int, n: int, offset: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}") == str(pkg):
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, n, offset)

    monkeypatch.setattr(os, "pread", failing)
    with pytest.raises(PackageRejected) as info:
        private_copy(str(pkg), str(tmp_path / "private"))
    finding = info.value.findings[0]  # type: ignore[attr-defined]
    assert finding.code == "archive.unreadable" and "Input/output error" in finding.message and "EIO" in finding.found
    assert os.listdir(tmp_path / "private") == []  # the partial copy is gone
    report = probe_run.probe(pkg, ProbeOptions(verify_only=True))
    codes = [f.code for p in report.phases for f in p.findings]
    assert codes == ["archive.unreadable"] and report.exit_code == 1, codes


def test_a_hole_between_entries_is_refused_in_place(tmp_path: Path) -> None:
    # gigabytes between two entries pass every check but this one: nothing copied
    from tests.hostile.zipcraft import Raw, central_header, end_record, local_header

    first, second = Raw("m/archive_format", b"pt2"), Raw("m/data/aotinductor/model/a.so", b"\x7fELF")
    holed = tmp_path / "m.pt2"
    with open(holed, "wb") as fh:
        fh.write(local_header(first) + first.data)
        fh.seek(2 << 30)  # a 2 GB hole
        second_at = fh.tell()
        fh.write(local_header(second) + second.data)
        cd_at = fh.tell()
        directory = central_header(first, 0) + central_header(second, second_at)
        fh.write(directory + end_record(2, len(directory), cd_at))
    with pytest.raises(PackageRejected) as info:
        private_copy(str(holed), str(tmp_path / "private"))
    assert [f.code for f in info.value.findings] == ["archive.ambiguous"]  # type: ignore[attr-defined]
    assert not (tmp_path / "private").exists()
