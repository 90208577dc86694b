"""Issue 40, finding 14: an output that names a FIFO or device never hangs the run.

``--log-file``, ``$GITHUB_STEP_SUMMARY`` and the reports are opened and written without blocking
(runtime_probe/reporting/output.py): a FIFO without a reader, or with one that stops reading, costs that
output (a warning), never the run. Each test runs with a small bound and a thread timeout, so a
regression fails instead of hanging the suite.
"""

from __future__ import annotations

import io
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from runtime_probe.reporting import markdown, output
from runtime_probe.reporting.errors import ToolError
from runtime_probe.reporting.findings import error
from runtime_probe.reporting.output import append_output, write_atomic, write_output
from runtime_probe.reporting.paths import Paths, Read
from runtime_probe.reporting.progress import Progress
from runtime_probe.reporting.report import Report, make_phase


@pytest.fixture(autouse=True)
def _short_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "_READER_WAIT_S", 0.2)
    monkeypatch.setattr(output, "_STALL_S", 0.5)


def _bounded(fn: object, seconds: float = 10.0) -> None:
    """Run ``fn`` in a thread; fail (not hang) when it has not returned within ``seconds``."""
    failure: list[BaseException] = []

    def body() -> None:
        try:
            fn()  # type: ignore[operator]
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            failure.append(exc)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still blocked after {seconds}s"
    if failure:
        raise failure[0]


def _fifo(tmp_path: Path, name: str = "out.fifo") -> Path:
    path = tmp_path / name
    os.mkfifo(path)
    return path


class _StalledReader:
    """Opens the FIFO for reading and never reads: a writer fills the pipe, then waits."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def close(self) -> None:
        os.close(self.fd)


def test_append_to_a_fifo_without_reader_fails_in_bounded_time(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    with pytest.raises(ToolError, match=r"FIFO .*with no reader"):
        _bounded(lambda: append_output(str(fifo), b"summary", "the summary"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_reader_that_stops_reading_is_a_stall_not_a_hang(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    reader = _StalledReader(fifo)
    try:
        with pytest.raises(ToolError, match=r"took nothing for 0\.5s"):
            _bounded(lambda: write_output(str(fifo), b"x" * (1 << 20)))  # 1 MiB: more than a pipe holds
    finally:
        reader.close()


def test_log_file_fifo_without_reader_warns_and_the_run_goes_on(tmp_path: Path) -> None:
    fifo, err = _fifo(tmp_path), io.StringIO()

    def run() -> None:
        say = Progress(err, log=str(fifo))
        say("archive", "start")
        say.log_line("torch says something")
        say("archive", "passed", 0.1)
        say.close()

    _bounded(run)
    assert "warning: cannot write the --log-file" in err.getvalue() and "going on without the log" in err.getvalue()
    assert "[archive] passed in 0.10s" in err.getvalue()


def test_log_file_whose_reader_stalls_is_dropped_once(tmp_path: Path) -> None:
    fifo, err = _fifo(tmp_path), io.StringIO()
    reader = _StalledReader(fifo)
    try:

        def run() -> None:
            say = Progress(err, log=str(fifo))
            for i in range(2000):  # ~100 KiB of lines: the pipe fills, then the log is given up
                say.log_line(f"line {i} " + "x" * 40)
            say.close()

        _bounded(run)
    finally:
        reader.close()
    assert err.getvalue().count("the rest of the run is not logged") == 1


def test_log_lines_are_escaped_one_line_each(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    say = Progress(io.StringIO(), log=str(log))
    say.log_line("UserWarning: \x1b[31mred\x1b[0m name")
    say.close()
    text = log.read_text()
    assert "\x1b" not in text and "\\x1b[31mred" in text and text.count("\n") == 1


def _report() -> Report:
    return Report(kind="probe", package={"path": "m.pt2"}, phases=(make_phase("cli", 0.0, [error("tool.usage", "cli", "x")]),))


def test_step_summary_fifo_without_reader_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = _fifo(tmp_path)
    monkeypatch.setenv(markdown.STEP_SUMMARY, str(fifo))
    _bounded(lambda: markdown.append_step_summary(_report()))
    assert "warning: the summary was not appended" in capsys.readouterr().err


def test_step_summary_is_never_appended_to_a_file_the_run_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pkg = tmp_path / "m.pt2"
    pkg.write_bytes(b"the release")
    monkeypatch.setenv(markdown.STEP_SUMMARY, str(pkg))
    markdown.append_step_summary(_report(), Paths((Read("the package being checked", str(pkg)),)))
    assert pkg.read_bytes() == b"the release"
    assert "would overwrite the package being checked" in capsys.readouterr().err


def test_step_summary_appends_to_a_regular_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv(markdown.STEP_SUMMARY, str(summary))
    markdown.append_step_summary(_report())
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "FAILED" in text


def test_write_atomic_exclusive_takes_a_free_name_only(tmp_path: Path) -> None:
    key = tmp_path / "k"
    write_atomic(key, b"first", mode=0o600, exclusive=True)
    assert key.read_bytes() == b"first" and stat.S_IMODE(key.stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        write_atomic(key, b"second", exclusive=True)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        write_atomic(tmp_path / "dangling", b"x", exclusive=True)
    assert key.read_bytes() == b"first" and not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "k"]  # no temp file left


def test_write_atomic_exclusive_racers_one_wins(tmp_path: Path) -> None:
    target, won, lost = tmp_path / "k", [], []
    go = threading.Event()

    def racer(i: int) -> None:
        go.wait()
        try:
            write_atomic(target, f"writer {i}".encode(), exclusive=True)
            won.append(i)
        except FileExistsError:
            lost.append(i)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    go.set()
    for t in threads:
        t.join(10)
    assert len(won) == 1 and len(lost) == 7
    assert target.read_bytes() == f"writer {won[0]}".encode()
