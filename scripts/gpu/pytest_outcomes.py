"""A pytest plugin for runs on the GPU machine, whose calls end at a hard time limit: each test's
start, outcome, time and failure text is written to $OUTCOMES_LOG as it happens (pytest's own
summary and junit come only at the end, and a killed run leaves neither).
    PYTHONPATH=scripts/gpu OUTCOMES_LOG=out.txt python -m pytest -p pytest_outcomes ...
"""

from __future__ import annotations

import os
import time
from typing import Any

# the controller alone writes (under xdist the workers load the plugin too)
_PATH = None if os.environ.get("PYTEST_XDIST_WORKER") else os.environ.get("OUTCOMES_LOG")
_T0 = time.time()


def _write(line: str) -> None:
    if _PATH:
        with open(_PATH, "a") as f:
            f.write(line)


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _write(f"[{time.time() - _T0:6.0f}s] START {nodeid}\n")


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or report.outcome != "passed":
        _write(f"[{time.time() - _T0:6.0f}s] {report.outcome.upper()} {report.nodeid} ({report.when}, {report.duration:.1f}s)\n")
        if report.failed:
            _write(str(report.longrepr)[-5000:] + "\n----\n")
