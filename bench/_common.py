"""Shared helpers for the benchmarks: interleaved rounds, foreign-load accounting, stats, tables.

Every benchmark runs its arms interleaved (the order rotates each round: A B C, B C A, C A B, ...)
after a warm-up round, so a burst of load from another process lands on every arm alike. For each
timed sample it also records how much CPU the rest of the machine used meanwhile ("foreign"
cores: system-wide busy time from /proc/stat minus this benchmark's own CPU time, divided by the
wall time), so a reader can see how quiet the machine was while each number was taken.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runtime_probe.host.cpu import cpu_model

ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "ROOT",
    "CommandFailed",
    "Sample",
    "Summary",
    "arm_record",
    "arm_table",
    "bare_steps",
    "base_parser",
    "build_example",
    "busy_cores",
    "child_env",
    "interleave",
    "load_snapshot",
    "log",
    "machine",
    "md_table",
    "measure",
    "publish",
    "ratio_record",
    "ratio_table",
    "rounds_of",
    "run_timed",
    "shown_command",
    "summarize",
    "timed",
    "wait_for_quiet",
    "write_json",
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the machine ---------------------------------------------------------------------------------


def load_snapshot() -> dict[str, Any]:
    """`uptime` as printed, and the 1/5/15-minute load averages."""
    try:
        text = subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        text = ""
    one, five, fifteen = os.getloadavg()
    return {"uptime": text, "load": [round(one, 2), round(five, 2), round(fifteen, 2)], "time": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def machine() -> dict[str, Any]:
    import torch

    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model() or platform.processor() or "unknown",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }


def busy_cores(window_s: float = 5.0) -> float:
    """Cores the machine kept busy over the next ``window_s`` seconds (this process sleeps: all of
    it is someone else's)."""
    b0, t0 = _busy_seconds(), time.perf_counter()
    time.sleep(window_s)
    return max(0.0, (_busy_seconds() - b0) / (time.perf_counter() - t0))


def wait_for_quiet(max_load: float, max_wait_s: float, poll_s: float = 15.0, max_busy: float = 0.5) -> dict[str, Any]:
    """Wait until the 1-minute load average is at most ``max_load`` and, over a 5 s window, the
    rest of the machine keeps at most ``max_busy`` cores busy (or ``max_wait_s`` passed).

    Returns the snapshot taken when the wait ended, with ``busy_cores``, ``waited_s`` and ``quiet``.
    """
    started = time.monotonic()
    while True:
        busy = busy_cores()
        snap = load_snapshot()
        quiet = snap["load"][0] <= max_load and busy <= max_busy
        if quiet or time.monotonic() - started >= max_wait_s:
            break
        log(
            f"load {snap['load'][0]:.2f} (limit {max_load}), {busy:.2f} cores busy elsewhere (limit {max_busy}): "
            f"waiting ({time.monotonic() - started:.0f}s so far, at most {max_wait_s:.0f}s)"
        )
        time.sleep(poll_s)
    snap["busy_cores"] = round(busy, 2)
    snap["waited_s"] = round(time.monotonic() - started, 1)
    snap["quiet"] = quiet
    if not quiet:
        log(f"still not quiet after {max_wait_s:.0f}s: measuring anyway (recorded)")
    return snap


# -- measuring -----------------------------------------------------------------------------------


@dataclass
class Sample:
    """One timed measurement."""

    seconds: float  # wall time (per call for in-process blocks)
    own_cpu_s: float  # CPU time this benchmark (and the processes it waited for) used
    foreign_cores: float  # average cores used by everything else on the machine meanwhile
    extra: dict[str, Any] = field(default_factory=dict)


def _busy_seconds() -> float:
    """System-wide CPU time spent busy (all cores), from /proc/stat."""
    try:
        with open("/proc/stat", encoding="utf-8") as fh:
            fields = fh.readline().split()[1:]
    except OSError:
        return float("nan")
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    busy = sum(values[:8]) - idle  # user nice system idle iowait irq softirq steal (guest is inside user)
    return busy / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@contextmanager
def measure() -> Iterator[dict[str, float]]:
    """Times the block; on exit the dict holds seconds, own_cpu_s and foreign_cores.

    Own CPU counts this process and every child it has waited for (their children included, when
    they waited for them), so a subprocess's compiler jobs are its own, not foreign.
    """
    out: dict[str, float] = {}
    busy0, cpu0, t0 = _busy_seconds(), _own_cpu(), time.perf_counter()
    try:
        yield out
    finally:
        t1, cpu1, busy1 = time.perf_counter(), _own_cpu(), _busy_seconds()
        wall = t1 - t0
        own = cpu1 - cpu0
        out["seconds"] = wall
        out["own_cpu_s"] = own
        # /proc/stat ticks are 10 ms: on short blocks the estimate is coarse, never negative here
        out["foreign_cores"] = max(0.0, (busy1 - busy0 - own) / wall) if wall > 0 else 0.0


def timed(fn: Callable[[], object]) -> Sample:
    """``fn()`` in this process as one Sample (``measure``): an arm of ``interleave``."""
    with measure() as m:
        fn()
    return Sample(m["seconds"], m["own_cpu_s"], m["foreign_cores"])


class CommandFailed(RuntimeError):
    pass


def run_timed(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> Sample:
    """Run a command as a fresh process; its wall time, CPU time and the foreign load meanwhile.

    Raises CommandFailed when it exits non-zero (a benchmark of a failing command means nothing).
    """
    full_env = {**os.environ, **(env or {})}
    with measure() as m:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, env=full_env, cwd=cwd)
    if proc.returncode != 0:
        raise CommandFailed(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return Sample(m["seconds"], m["own_cpu_s"], m["foreign_cores"], {"stdout": proc.stdout, "stderr": proc.stderr})


def interleave(
    arms: Sequence[tuple[str, Callable[[], Sample]]], rounds: int, warmup: int = 1, label: str = "s", scale: float = 1.0
) -> dict[str, list[Sample]]:
    """Run every arm ``warmup`` times (discarded), then ``rounds`` rounds, one sample per arm each,
    the arm order rotating from round to round. Returns the timed samples per arm."""
    names = [name for name, _ in arms]
    for w in range(warmup):
        for name, fn in arms:
            s = fn()
            log(f"  warm-up {w + 1}/{warmup} {name:<14} {s.seconds * scale:10.2f} {label}")
    results: dict[str, list[Sample]] = {name: [] for name in names}
    for r in range(rounds):
        order = list(arms[r % len(arms) :]) + list(arms[: r % len(arms)])
        for name, fn in order:
            s = fn()
            results[name].append(s)
            log(f"  round {r + 1}/{rounds} {name:<14} {s.seconds * scale:10.2f} {label}  (foreign load {s.foreign_cores:.2f} cores)")
    return results


# -- reporting -----------------------------------------------------------------------------------


@dataclass
class Summary:
    n: int
    median: float
    min: float
    max: float
    q1: float
    q3: float


def summarize(values: Sequence[float]) -> Summary:
    vals = sorted(values)
    if not vals:
        raise ValueError("no values")
    if len(vals) >= 2:
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    else:
        q1 = q3 = vals[0]
    return Summary(len(vals), statistics.median(vals), vals[0], vals[-1], q1, q3)


def arm_record(samples: Sequence[Sample], scale: float = 1.0) -> dict[str, Any]:
    """JSON-able: the summary of the (scaled) times, the raw times, and the foreign load."""
    return {
        "summary": asdict(summarize([s.seconds * scale for s in samples])),
        "values": [round(s.seconds * scale, 4) for s in samples],
        "foreign_cores": asdict(summarize([s.foreign_cores for s in samples])),
        "own_cpu_s": [round(s.own_cpu_s, 3) for s in samples],
    }


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def arm_table(arms: Mapping[str, Mapping[str, Any]], *, digits: int, unit: str, cpu: bool) -> str:
    """The per-arm table of ``arm_record``s: median, range and IQR with ``digits`` decimals in
    ``unit``, the median own CPU seconds when ``cpu``, and the foreign load."""
    rows = []
    for name, rec in arms.items():
        s, f = rec["summary"], rec["foreign_cores"]
        row = [
            f"`{name}`",
            f"{s['median']:.{digits}f}",
            f"{s['min']:.{digits}f} – {s['max']:.{digits}f}",
            f"{s['q1']:.{digits}f} – {s['q3']:.{digits}f}",
        ]
        if cpu:
            row.append(f"{statistics.median(rec['own_cpu_s']):.1f}")
        rows.append([*row, f"{f['median']:.2f} (max {f['max']:.2f})"])
    cpu_header = ["CPU s (median)"] if cpu else []
    return md_table(["arm", f"median {unit}", "min – max", "IQR", *cpu_header, "foreign load, cores"], rows)


def ratio_table(ratios: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The table of (label, ``ratio_record``) pairs: median ratio, per-round range, goal, met."""
    rows = [
        [
            label,
            f"{r['ratio']:.3f}",
            f"{r['paired']['min']:.3f} – {r['paired']['max']:.3f}",
            f"≤ {r['goal']}",
            "**yes**" if r["met"] else "**NO**",
        ]
        for label, r in ratios
    ]
    return md_table(["ratio", "median ratio", "per-round min – max", "goal", "met"], rows)


def write_json(path: str | os.PathLike[str], data: Mapping[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def publish(data: Mapping[str, Any], start: Mapping[str, Any], end: Mapping[str, Any], json_path: str | None) -> int:
    """Print a benchmark's tables between the load readings, and save its JSON when asked."""
    print(f"uptime at start: {start['uptime']}")
    print(data["markdown"])
    print(f"uptime at end:   {end['uptime']}")
    if json_path:
        write_json(json_path, data)
    return 0


def base_parser(description: str, default_rounds: int, quick_rounds: int) -> Any:
    import argparse

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--rounds", type=int, default=None, help=f"timed rounds per arm (default {default_rounds}; --quick: {quick_rounds})")
    p.add_argument("--quick", action="store_true", help="fewer rounds: a smoke run, not a result")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds of every arm first (default 1)")
    p.add_argument("--max-load", type=float, default=1.5, help="wait until the 1-minute load average is at most this (default 1.5)")
    p.add_argument(
        "--max-busy", type=float, default=0.5, help="... and until other processes keep at most this many cores busy (default 0.5)"
    )
    p.add_argument("--max-wait", type=float, default=600.0, help="seconds to wait for that before measuring anyway (default 600)")
    p.add_argument("--json", metavar="PATH", help="write the results here (bench/run_all.py reads them)")
    p.add_argument(
        "--baseline",
        metavar="DIR",
        help="another copy of this project (e.g. `git archive main | tar -x -C /tmp/base`): its code runs as extra '@base' arms, "
        "interleaved with the rest, to compare two versions in one run",
    )
    p.set_defaults(_default_rounds=default_rounds, _quick_rounds=quick_rounds)
    return p


def rounds_of(args: Any) -> int:
    if args.rounds is not None:
        return int(args.rounds)
    return int(args._quick_rounds if args.quick else args._default_rounds)


def ratio_record(num: Sequence[Sample], den: Sequence[Sample], goal: float) -> dict[str, Any]:
    """num/den: the ratio of the medians (the headline), and the per-round ratios (paired, since
    both arms ran in the same round) as its spread."""
    med_num = statistics.median(s.seconds for s in num)
    med_den = statistics.median(s.seconds for s in den)
    paired = [a.seconds / b.seconds for a, b in zip(num, den)]
    ratio = med_num / med_den
    return {"ratio": round(ratio, 3), "paired": asdict(summarize(paired)), "goal": goal, "met": ratio <= goal}


def bare_steps(stdout: str) -> dict[str, float]:
    """The step seconds a bare baseline script (bench/_bare_*.py) prints as its JSON line."""
    for line in stdout.splitlines():
        if line.startswith("{"):
            return {k: float(v) for k, v in json.loads(line).get("steps", {}).items()}
    return {}


def shown_command(cmd: Sequence[str]) -> str:
    """``cmd`` as the results show it: ``python`` for this interpreter, paths relative to ROOT."""
    return " ".join("python" if c == sys.executable else c.replace(str(ROOT) + os.sep, "") for c in cmd)


def child_env(tree: str | os.PathLike[str] = ROOT) -> dict[str, str]:
    """PYTHONPATH with ``tree`` (this checkout by default) first, so the processes we time run
    that tree's code."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.fspath(tree) + (os.pathsep + path if path else "")}


def add_package_arg(parser: Any) -> None:
    """``--package PKG``: the package a benchmark measures (default: the example, built first)."""
    parser.add_argument("--package", metavar="PKG", help="an aoti-guard package (default: build the example first)")


def package_or_example(package: str | None, out_dir: str) -> str:
    """The ``--package`` given (absolute), or the bundled example built into ``out_dir``."""
    return os.path.abspath(package) if package else build_example(out_dir)


def build_example(out_dir: str, *extra: str) -> str:
    """``aoti-guard build`` of the bundled example into ``out_dir`` (not timed); returns the path."""
    out = os.path.join(out_dir, "example.pt2")
    log(f"building the example package into {out} (not timed)")
    proc = subprocess.run(
        [sys.executable, "-m", "aoti_guard", "build", "-o", out, *extra],
        capture_output=True,
        text=True,
        env={**os.environ, **child_env()},
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise CommandFailed(f"building the example failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return out
