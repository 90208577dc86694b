"""Run the real probe CLI on corpus cases and measure it: exit code, findings, time, peak memory.

Each case is one ``python -m runtime_probe PKG --json R`` process. Its peak RSS comes from
``os.wait4``: the kernel's accounting for that process and the children it waited for, so a probe
that started a torch child is measured with it. One caveat shapes how this runs: at exec, Linux
folds the *parent's* peak RSS into the child's ``ru_maxrss`` (subprocess uses vfork), so cases are
launched from a fresh, small interpreter (``run_isolated``: ``python -m tests.hostile.runner``),
never from pytest's, which holds torch. A case that runs past its time limit is killed and
reported as such; a probe that exits 3 or prints a traceback counts as a crash.

    python -m tests.hostile.runner CASES.json RESULTS.json [--workers N] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .make_corpus import Case

__all__ = ["Outcome", "run_case", "run_corpus", "run_isolated"]


@dataclass(frozen=True)
class Outcome:
    case: Case
    returncode: int | None  # None: killed at the time limit
    seconds: float
    max_rss: int  # bytes
    codes: tuple[str, ...]  # error codes of the report, in order
    traceback: bool
    output_tail: str

    @property
    def crashed(self) -> bool:
        """The probe itself failed: a traceback, exit 3, a signal, or killed at the time limit."""
        return self.traceback or self.returncode not in (0, 1, 2)

    @property
    def ok(self) -> bool:
        return self.returncode == 1 and not self.traceback and bool(self.case.expect & set(self.codes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.to_dict(),
            "returncode": self.returncode,
            "seconds": self.seconds,
            "max_rss": self.max_rss,
            "codes": list(self.codes),
            "traceback": self.traceback,
            "output_tail": self.output_tail[-4000:],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(
            Case.from_dict(d["case"]), d["returncode"], d["seconds"], d["max_rss"], tuple(d["codes"]), d["traceback"], d["output_tail"]
        )

    def problem(self) -> str:
        if self.ok:
            return ""
        return (
            f"{self.case.name}: exit {self.returncode}, codes {list(self.codes)}, expected one of {sorted(self.case.expect)}"
            f"{', TRACEBACK' if self.traceback else ''}\n{self.output_tail[-1500:]}"
        )


def run_case(case: Case, *, timeout: float = 60.0, env: Mapping[str, str] | None = None) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        report = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "runtime_probe", str(case.path), "--json", str(report), "-q", "--timeout", "120", *case.args]
        with open(Path(tmp) / "out", "w+b") as out:
            started = time.monotonic()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
            killed = threading.Event()

            def kill() -> None:
                killed.set()
                proc.kill()

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
            seconds = time.monotonic() - started
            proc.returncode = os.waitstatus_to_exitcode(status)  # wait4 reaped it; tell Popen
            out.seek(0)
            output = out.read()[-20000:].decode("utf-8", "replace")
        codes: tuple[str, ...] = ()
        if report.exists():
            data = json.loads(report.read_text())
            codes = tuple(f["code"] for p in data["phases"] for f in p["findings"] if f["severity"] == "error")
    return Outcome(
        case,
        None if killed.is_set() else proc.returncode,
        seconds,
        usage.ru_maxrss * 1024,
        codes,
        "Traceback" in output,
        output,
    )


def run_corpus(cases: Iterable[Case], *, workers: int = 2, timeout: float = 60.0) -> list[Outcome]:
    """Run every case, ``workers`` at a time; the outcomes come back in the cases' order."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda c: run_case(c, timeout=timeout), cases))


def run_isolated(cases: list[Case], *, workers: int = 2, timeout: float = 60.0) -> list[Outcome]:
    """``run_corpus`` from a fresh interpreter, so memory figures are the probe's own."""
    with tempfile.TemporaryDirectory(prefix="hostile-run-") as tmp:
        cases_json, results_json = Path(tmp) / "cases.json", Path(tmp) / "results.json"
        cases_json.write_text(json.dumps([c.to_dict() for c in cases]))
        argv = [
            sys.executable,
            "-m",
            "tests.hostile.runner",
            str(cases_json),
            str(results_json),
            "--workers",
            str(workers),
            "--timeout",
            str(timeout),
        ]
        subprocess.run(argv, check=True, cwd=Path(__file__).resolve().parents[2])
        return [Outcome.from_dict(d) for d in json.loads(results_json.read_text())]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.hostile.runner", description="run corpus cases through python -m runtime_probe")
    p.add_argument("cases", type=Path)
    p.add_argument("results", type=Path)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args(argv)
    cases = [Case.from_dict(d) for d in json.loads(args.cases.read_text())]
    outcomes = run_corpus(cases, workers=args.workers, timeout=args.timeout)
    args.results.write_text(json.dumps([o.to_dict() for o in outcomes]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
