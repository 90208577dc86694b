"""Progress in a pipe gets a heartbeat during a long phase; on a terminal whose report follows, an
ended phase's live line is erased (the report's table shows it once); the running phase is known
(an interruption names it)."""

from __future__ import annotations

import io
import re
import time

import pytest

from runtime_probe.reporting.progress import HEARTBEAT_S, Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_heartbeat_in_a_pipe() -> None:
    assert HEARTBEAT_S == 10.0
    out = io.StringIO()
    say = Progress(out, heartbeat_s=0.2)
    say("compile", "start")
    time.sleep(0.55)
    say("compile", "compiling the release model")  # a note: the next beat says what it is doing
    time.sleep(0.35)
    say("compile", "passed", 0.9)
    time.sleep(0.3)  # no beat after the phase ended
    say.close()
    lines = out.getvalue().splitlines()
    beats = [line for line in lines if "still running" in line]
    assert lines[0] == "[compile] start" and lines[-1] == "[compile] passed in 0.90s"
    assert len(beats) >= 2 and re.fullmatch(r"\[compile\] still running \(0s\)", beats[0]), beats
    assert beats[-1].startswith("[compile] still running: compiling the release model ("), beats
    assert "still running" not in lines[-1]


def test_quiet_has_no_heartbeat_but_knows_the_phase() -> None:
    out = io.StringIO()
    say = Progress(out, quiet=True, heartbeat_s=0.1)
    say("archive", "start")
    say("archive", "passed", 0.1)
    say("compile", "start")
    time.sleep(0.3)
    assert say.running == "compile" and out.getvalue() == ""
    say("compile", "failed", 0.3)
    assert say.running is None
    say.close()


def test_transient_live_line_is_erased(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    out = _Tty()
    say = Progress(out, colour=False, transient=True)
    say("archive", "start")
    say("archive", "passed", 0.1)
    say.close()
    text = out.getvalue()
    assert "[archive] ..." in text and "passed" not in text and text.endswith("\r\x1b[2K")  # printed once: by the report
    kept = _Tty()
    say = Progress(kept, colour=False)  # no report follows on this terminal: the line stays
    say("archive", "start")
    say("archive", "passed", 0.1)
    say.close()
    assert kept.getvalue().endswith("[archive] passed in 0.10s\n")
