"""The probe's private copy of the package and its temporary folder (issue 16 items 2 and 5)."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

import pytest

from runtime_probe.errors import UsageError
from runtime_probe.package.private_copy import private_copy
from runtime_probe.probe import run as probe_run


def test_the_copy_is_private_and_byte_identical(tmp_path: Path) -> None:
    src = tmp_path / "m.pt2"
    src.write_bytes(os.urandom(3 << 20) + b"end")
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
