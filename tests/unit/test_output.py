"""Where reports go (runtime_probe/reporting/output.py): stdout, in place for non-regular files, the umask,
and never over a file the run reads."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from runtime_probe.reporting.errors import ToolError, UsageError
from runtime_probe.reporting.output import check_report_path, current_umask, write_atomic, write_output


def test_dash_writes_to_stdout(tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_output("-", b'{"a": 1}\n')
    assert capfd.readouterr().out == '{"a": 1}\n'
    assert not (tmp_path / "-").exists()


def _read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def reader() -> None:
        with open(path, "rb") as fh:
            into.append(fh.read())

    t = threading.Thread(target=reader)
    t.start()
    return t


def test_a_fifo_is_written_in_place_not_renamed_over(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    t = _read_fifo(fifo, got)
    write_output(str(fifo), b"report\n")
    t.join(10)
    assert got == [b"report\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not a regular file


def test_a_symlink_to_a_fifo_stays_a_symlink(tmp_path: Path) -> None:
    """/dev/stdout is a symlink to /proc/self/fd/1: the report goes through it, the link stays."""
    fifo, link = tmp_path / "out.fifo", tmp_path / "stdout"
    os.mkfifo(fifo)
    link.symlink_to(fifo)
    got: list[bytes] = []
    t = _read_fifo(fifo, got)
    write_output(str(link), b"x")
    t.join(10)
    assert got == [b"x"] and link.is_symlink()


def test_a_fifo_without_reader_fails_not_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runtime_probe.reporting.output._READER_WAIT_S", 0.2)
    fifo = tmp_path / "lonely.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ToolError, match="cannot write the report"):
        write_output(str(fifo), b"x")


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_report_mode_follows_the_umask(tmp_path: Path, mask: int) -> None:
    old = os.umask(mask)
    try:
        assert current_umask() == mask
        write_output(str(tmp_path / "r.json"), b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "r.json").st_mode) == 0o666 & ~mask


def test_write_atomic_keeps_an_explicit_mode(tmp_path: Path) -> None:
    write_atomic(tmp_path / "k", b"secret", mode=0o600)
    assert stat.S_IMODE(os.stat(tmp_path / "k").st_mode) == 0o600


@pytest.mark.parametrize("how", ["same", "relative", "symlink", "hardlink", "dotdot"])
def test_a_report_path_that_is_an_input_is_refused(tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "model.pt2"
    pkg.write_bytes(b"package")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    path = {
        "same": str(pkg),
        "relative": "model.pt2",
        "symlink": str(tmp_path / "link.json"),
        "hardlink": str(tmp_path / "hard.json"),
        "dotdot": "sub/../model.pt2",
    }[how]
    if how == "symlink":
        os.symlink(pkg, path)
    if how == "hardlink":
        os.link(pkg, path)
    with pytest.raises(UsageError, match="is the package being checked"):
        check_report_path(path, "--json", [("the package being checked", str(pkg))])


def test_report_path_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        check_report_path(str(tmp_path / "no" / "r.json"), "--json")
    with pytest.raises(UsageError, match="is a folder"):
        check_report_path(str(tmp_path), "--json")
    check_report_path("-", "--json", [("the package", "-")])  # stdout is never an input
    check_report_path(str(tmp_path / "new.json"), "--json", [("the package", str(tmp_path / "p.pt2"))])


@pytest.mark.skipif(sys.platform != "linux", reason="/dev/stdout as a symlink is Linux's layout")
def test_dev_stdout_is_special() -> None:
    check_report_path("/dev/stdout", "--json")  # a device: accepted, and written in place
