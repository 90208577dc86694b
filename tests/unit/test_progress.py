"""Progress lines: one format for both command lines; a live, coloured line on a terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime_probe.reporting.progress import Progress

from .fakepkg import make_package, write_key_pair

REPO = Path(__file__).resolve().parents[2]
TIMING = re.compile(r" in \d+\.\d\ds")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_in_a_pipe() -> None:
    out = io.StringIO()
    say = Progress(out)
    say("archive", "start")
    say("archive", "passed", 0.5)
    say("load", "skipped: host failed")
    say("escalate", "step 1 strict rerun")
    assert out.getvalue() == "[archive] start\n[archive] passed in 0.50s\n[load] skipped: host failed\n[escalate] step 1 strict rerun\n"


def test_live_line_redraws_with_a_running_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    out = _Tty()
    say = Progress(out)
    assert say.live and say.colour
    say("compile", "start")
    time.sleep(0.8)
    say("compile", "passed")
    say.close()
    text = out.getvalue()
    times = [float(t) for t in re.findall(r"\[compile\] \x1b\[36m\.\.\.\x1b\[0m +(\d+\.\d)s", text)]
    assert len(times) >= 2 and times == sorted(times) and times[-1] >= 0.5  # redrawn as time runs
    assert re.search(r"\r\x1b\[2K\[compile\] \x1b\[32mpassed\x1b\[0m in 0\.[5-9]\d+s\n$", text)


def test_escalation_steps_each_get_a_live_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    out = _Tty()
    say = Progress(out, colour=False)
    say("escalate", "start")
    say("escalate", "step 1 strict rerun")
    say("escalate", "step 2 debug twin")
    say("escalate", "failed")
    say.close()
    lines = out.getvalue().split("\n")
    assert any("[escalate] step 1 strict rerun" in line for line in lines[:-2])  # kept on its own line
    assert lines[-2].endswith("[escalate] failed in " + lines[-2].rsplit(" in ", 1)[1])


@pytest.mark.parametrize("env", [{"CI": "true"}, {"TERM": "dumb"}])
def test_no_live_line_under_ci_or_dumb_terminal(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    monkeypatch.setenv("TERM", "xterm")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert not Progress(_Tty()).live


def test_no_colour_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")
    say = Progress(_Tty())
    assert say.live and not say.colour


def _unsigned(tmp_path: Path) -> tuple[Path, Path]:
    return make_package(tmp_path / "m.pt2"), write_key_pair(tmp_path / "k")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR")}
    return {**env, "PYTHONPATH": str(REPO), "TERM": "xterm", **extra}


def test_a_pseudo_terminal_shows_the_live_coloured_line(tmp_path: Path) -> None:
    pkg, pub = _unsigned(tmp_path)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime_probe", str(pkg), "--public-key", str(pub)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=_env(),
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(60) == 1
    text = b"".join(chunks).decode()
    assert "\r\x1b[2K[archive] \x1b[31mfailed\x1b[0m in " in text
    assert "[archive] \x1b[36m...\x1b[0m" in text


def test_both_command_lines_print_the_same_lines(tmp_path: Path) -> None:
    pkg, pub = _unsigned(tmp_path)
    outs = []
    for argv in (["-m", "runtime_probe"], ["-m", "aoti_guard", "probe"]):
        proc = subprocess.run(
            [sys.executable, *argv, str(pkg), "--public-key", str(pub)], capture_output=True, text=True, env=_env(), timeout=120
        )
        assert proc.returncode == 1
        outs.append([TIMING.sub(" in Xs", line) for line in proc.stderr.splitlines() if line.startswith("[")])
    assert outs[0] == outs[1] and outs[0][:2] == ["[archive] start", "[archive] failed in Xs"]
    assert not any("\x1b" in line for line in outs[0])  # a pipe: no colour, no redraws


def test_progress_is_importable_where_docs_api_says() -> None:
    # docs/api.md tells users to pass ``runtime_probe.Progress()``; the module's own path is internal
    import runtime_probe

    assert runtime_probe.Progress is Progress
    assert "Progress" in runtime_probe.__all__
