"""Ctrl-C (SIGINT) during a build names the phase it stopped in, on stderr and in the --json report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import MODELS

pytestmark = pytest.mark.integration


def test_ctrl_c_during_compile_names_the_phase(tmp_path: Path) -> None:
    report = tmp_path / "build.json"
    argv = ["-m", "aoti_guard", "build", f"{MODELS}:static", "-o", str(tmp_path / "m.pt2"), "--no-debug-twin", "--json", str(report)]
    env = {**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}  # a compile long enough to interrupt
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if line.startswith("[compile] start") or not line:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    text = "".join(seen) + rest
    assert proc.returncode == 3, text[-3000:]
    assert "interrupted (Ctrl-C) during the compile phase" in text
    finding = json.loads(report.read_text())["phases"][0]["findings"][0]
    assert finding["message"] == "interrupted (Ctrl-C) during the compile phase" and finding["code"] == "tool.failed"
    assert not (tmp_path / "m.pt2").exists()
