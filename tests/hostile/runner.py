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
import hashlib
import json
import os
import re
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
    lost: tuple[str, ...] = ()  # input files (the package, a key, weights) the run changed
    raw_control: bool = False  # a raw control character (ESC, U+202E) reached the output
    report_bytes: int = 0

    @property
    def crashed(self) -> bool:
        """The probe itself failed: a traceback, exit 3, a signal, or killed at the time limit."""
        return self.traceback or self.returncode not in (0, 1, 2)

    @property
    def ok(self) -> bool:
        """The expected exit code and finding (none required where no report can be written), no
        file lost, no raw control character printed, and a report of bounded size."""
        found = bool(self.case.expect & set(self.codes)) if self.case.expect else True
        safe = not self.lost and not self.raw_control and self.report_bytes <= MAX_REPORT_BYTES
        return self.returncode == self.case.exit_code and not self.traceback and found and safe

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.to_dict(),
            "returncode": self.returncode,
            "seconds": self.seconds,
            "max_rss": self.max_rss,
            "codes": list(self.codes),
            "traceback": self.traceback,
            "output_tail": self.output_tail[-4000:],
            "lost": list(self.lost),
            "raw_control": self.raw_control,
            "report_bytes": self.report_bytes,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(
            Case.from_dict(d["case"]),
            d["returncode"],
            d["seconds"],
            d["max_rss"],
            tuple(d["codes"]),
            d["traceback"],
            d["output_tail"],
            tuple(d.get("lost", ())),
            d.get("raw_control", False),
            d.get("report_bytes", 0),
        )

    def problem(self) -> str:
        if self.ok:
            return ""
        return (
            f"{self.case.name}: exit {self.returncode} (expected {self.case.exit_code}), codes {list(self.codes)}, expected one of "
            f"{sorted(self.case.expect)}{', TRACEBACK' if self.traceback else ''}{', LOST ' + str(list(self.lost)) if self.lost else ''}"
            f"{', RAW CONTROL CHARACTERS' if self.raw_control else ''}, report {self.report_bytes} bytes\n{self.output_tail[-1500:]}"
        )


MAX_REPORT_BYTES = 1 << 20  # a report stays small whatever the package lists
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def _inputs(case: Case) -> list[Path]:
    """The package and every regular file the case passes (keys, weights): none may change."""
    files = [case.path, *(Path(a) for a in case.args if os.path.isabs(a))]
    return [f for f in files if f.is_file()]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_case(case: Case, *, timeout: float = 60.0, env: Mapping[str, str] | None = None) -> Outcome:
    before = {str(f): _digest(f) for f in _inputs(case)}
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
        report_bytes = report.stat().st_size if report.exists() else 0
        if report.exists():
            data = json.loads(report.read_text())
            codes = tuple(f["code"] for p in data["phases"] for f in p["findings"] if f["severity"] == "error")
    lost = tuple(name for name, digest in before.items() if not Path(name).is_file() or _digest(Path(name)) != digest)
    return Outcome(
        case,
        None if killed.is_set() else proc.returncode,
        seconds,
        usage.ru_maxrss * 1024,
        codes,
        "Traceback" in output,
        output,
        lost,
        bool(_CONTROL.search(output)),
        report_bytes,
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
