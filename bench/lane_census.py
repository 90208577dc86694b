"""Where a test lane's CPU goes, and the floor under its time (issue 27): every Python process
of the lane records its own CPU and what its start-up and its imports cost (torch, Inductor and
sympy by name, the rest by package) (bench/census_hook.py, put in the venv for the run through a .pth and taken out after); every
test records its wall time and the CPU of its worker and of the processes it reaped
(bench/census_plugin.py). The report sets the start-up and the imports apart from the rest: the
rest is the floor, what the lane would still cost if no process paid to start.

    python -m bench.lane_census run [--venv .venv] [--out DIR] [-- PYTEST ARGS]   # the lane, then the report
    python -m bench.lane_census report DIR                                          # the report of a run

``run`` runs the README's test command the way CI does (``CI=1``, every tier this machine has,
lint and types left out: ``SKIP_LINT=1``), so the container and Slurm tests need their engines
(scripts/docker/ensure_engine.sh, scripts/docker/build_base_image.sh, scripts/slurm/setup_local_cluster.sh).
Before the lane it measures what the watched imports cost a process that does nothing else
(``standalone.json``, median of 3): the report charges every process at least that much for what
it imported, an upper estimate of what any way of starting processes could save.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.census_hook import WATCHED

ROOT = Path(__file__).resolve().parent.parent
HOOK = Path(__file__).resolve().parent / "census_hook.py"
PTH = "zz_aoti_guard_census.pth"
STANDALONE_IMPORTS = "import torch; import torch._inductor.codecache; import torch._inductor.compile_fx; import sympy"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def kind(argv: list[str]) -> str:
    """A process's kind from its argv: the script's path in the checkout, ``python -m PKG`` for a
    package's ``__main__``, and the subcommand of ``aoti-guard``."""
    if not argv or not argv[0]:
        return "(no argv)"
    first = argv[0]
    if first == "-c":
        return "python -c"
    path = Path(first)
    try:
        parts = path.resolve().relative_to(ROOT).parts
        package = ".".join(parts[:-1])
    except ValueError:  # outside the checkout (a test's temporary script)
        parts = (path.name,)
        package = path.parent.name
    if "site-packages" in parts:  # an installed package (the venv may sit inside the checkout)
        parts = parts[parts.index("site-packages") + 1 :]
        package = ".".join(parts[:-1])
    if path.name == "__main__.py" and package:
        name = f"python -m {package}"
    else:
        name = "/".join(parts)
    if name == "python -m aoti_guard" and len(argv) > 1 and not argv[1].startswith("-"):
        name = f"aoti-guard {argv[1]}"
    return name


@dataclass
class Kind:
    processes: int = 0
    cpu: float = 0.0
    startup_and_imports: float = 0.0
    upper: float = 0.0


@dataclass
class Census:
    tests: int
    wall_sum: float
    lane_cpu: float
    python_cpu: float
    kinds: dict[str, Kind] = field(default_factory=dict)
    imports: dict[str, float] = field(default_factory=dict)  # every process's, by watched module or other package

    @property
    def measured(self) -> float:
        return sum(k.startup_and_imports for k in self.kinds.values())

    @property
    def upper(self) -> float:
        return sum(k.upper for k in self.kinds.values())


def read_lane(folder: Path) -> dict[str, Any]:
    """What ``run`` wrote of the test command: returncode, wall seconds, CPU seconds, cores."""
    path = folder / "lane.json"
    return json.loads(path.read_text()) if path.exists() else {}


def census(folder: Path, standalone: dict[str, float] | None = None) -> Census:
    """The census of a run's folder. ``standalone``: each watched import's cost in a process that
    does nothing else (default: the folder's standalone.json); a process is charged the larger of
    that and what it measured, for each watched import it made, plus its start-up. The lane's CPU is
    the test command's and everything it waited for (lane.json); a folder without it gets the sum
    over its tests (each worker and what it reaped), which leaves out collection and start."""
    if standalone is None:
        path = folder / "standalone.json"
        standalone = json.loads(path.read_text()) if path.exists() else {}
    tests = read_jsonl(folder / "tests.jsonl")
    procs = read_jsonl(folder / "procs.jsonl")
    result = Census(
        tests=len(tests),
        wall_sum=sum(t["wall"] for t in tests),
        lane_cpu=read_lane(folder).get("cpu", sum(t["self"] + t["children"] for t in tests)),
        python_cpu=sum(p["cpu"] for p in procs),
    )
    kinds: dict[str, Kind] = defaultdict(Kind)
    by_import: dict[str, float] = defaultdict(float)
    for p in procs:
        k = kinds[kind(p["argv"])]
        imports: dict[str, float] = p["imports"]
        for name, seconds in imports.items():
            by_import[name] += seconds
        k.processes += 1
        k.cpu += p["cpu"]
        k.startup_and_imports += p["startup"] + sum(imports.values())
        k.upper += min(p["cpu"], p["startup"] + sum(max(seconds, standalone.get(name, 0.0)) for name, seconds in imports.items()))
    result.kinds = dict(sorted(kinds.items(), key=lambda item: -item[1].cpu))
    result.imports = dict(sorted(by_import.items(), key=lambda item: -item[1]))
    return result


def floor_minutes(cpu: float, cores: int, utilisation: float = 1.0) -> float:
    """Minutes that ``cpu`` CPU-seconds take on ``cores`` cores busy ``utilisation`` of the time."""
    return cpu / (cores * utilisation) / 60


def report(folder: Path, cores: int, wall: float | None) -> str:
    c = census(folder)
    lines = [f"Lane census of {folder}: {c.tests} tests, {c.wall_sum:.0f} test-seconds"]
    if wall:
        lines[0] += f", the test command {wall:.0f} s on {cores} cores"
    lines += [
        f"  CPU of the lane (the test command and every process it waited for): {c.lane_cpu:.0f} CPU-s",
        f"  of it Python processes' own: {c.python_cpu:.0f} CPU-s; compilers, linkers, gdb, openssl, ...: {c.lane_cpu - c.python_cpu:.0f}",
        "",
        f"  {'kind':<44} {'processes':>9} {'CPU-s':>8} {'start-up + imports':>19} {'upper estimate':>15}",
    ]
    for name, k in list(c.kinds.items())[:20]:
        lines.append(f"  {name[:44]:<44} {k.processes:>9} {k.cpu:>8.1f} {k.startup_and_imports:>19.1f} {k.upper:>15.1f}")
    rest = c.lane_cpu - c.upper
    lines += [
        "",
        f"  start-up + imports, as measured: {c.measured:.0f} CPU-s; upper estimate: {c.upper:.0f} CPU-s",
        "  imports, CPU-s: " + ", ".join(f"{name} {seconds:.0f}" for name, seconds in list(c.imports.items())[:12]),
        f"  the floor (the lane's CPU less that upper estimate): {rest:.0f} CPU-s = {floor_minutes(rest, cores):.1f} min on {cores} cores busy all the time",
    ]
    if wall:
        utilisation = c.lane_cpu / (cores * wall)
        lines.append(f"  at this run's utilisation ({utilisation:.0%} of {cores} cores): {floor_minutes(rest, cores, utilisation):.1f} min")
    return "\n".join(lines)


def _reaped_cpu() -> float:
    """CPU seconds of the processes this one waited for, and of those they waited for (pytest-xdist
    waits for its workers: on two modules, 92.7 CPU-s here against 87.3 for the workers' own plus
    what their tests reaped)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _standalone(python: Path, folder: Path, rounds: int = 3) -> dict[str, float]:
    """Each watched import's CPU in a process that does only those imports, median of ``rounds``."""
    with tempfile.TemporaryDirectory(prefix="aoti-guard-census-") as scratch:
        env = {**os.environ, "AOTI_GUARD_CENSUS_DIR": scratch}
        for _ in range(rounds):
            subprocess.run([str(python), "-c", STANDALONE_IMPORTS], env=env, check=True)
        records = read_jsonl(Path(scratch) / "procs.jsonl")
    names = {name for r in records for name in r["imports"] if name in WATCHED}
    costs = {name: statistics.median(r["imports"].get(name, 0.0) for r in records) for name in sorted(names)}
    (folder / "standalone.json").write_text(json.dumps(costs, indent=1))
    return costs


def run(venv: Path, folder: Path, pytest_args: list[str]) -> int:
    python = venv / "bin" / "python"
    pth = _site_packages(python) / PTH
    if pth.exists():
        print(f"lane_census: {pth} is there already (another census running, or one that was cut off): remove it first", file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("procs.jsonl", "tests.jsonl"):
        (folder / name).unlink(missing_ok=True)
    # a .pth's import line runs at every interpreter start in that venv; the hook does nothing without the variable
    pth.write_text(f"import runpy; runpy.run_path({str(HOOK)!r})\n")
    try:
        costs = _standalone(python, folder)
        print("lane_census: standalone import costs (CPU-s):", ", ".join(f"{k} {v:.2f}" for k, v in costs.items()), flush=True)
        (folder / "procs.jsonl").unlink(missing_ok=True)
        env = {**os.environ, "CI": "1", "SKIP_LINT": "1", "VENV": os.path.relpath(venv, ROOT), "AOTI_GUARD_CENSUS_DIR": str(folder)}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        started, reaped = time.monotonic(), _reaped_cpu()
        code = subprocess.run(["bash", "scripts/test.sh", "-p", "bench.census_plugin", *pytest_args], cwd=ROOT, env=env).returncode
        wall, cpu = time.monotonic() - started, _reaped_cpu() - reaped
    finally:
        pth.unlink(missing_ok=True)
    (folder / "lane.json").write_text(json.dumps({"returncode": code, "wall": wall, "cpu": cpu, "cores": os.cpu_count()}))
    print(report(folder, os.cpu_count() or 1, wall))
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.lane_census", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the lane under the census, then print the report")
    r.add_argument("--venv", type=Path, default=ROOT / ".venv", help="the lane's venv (default: .venv)")
    r.add_argument("--out", type=Path, default=None, help="where the records go (default: a new temporary folder, kept)")
    r.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments (e.g. a marker expression)")
    p = sub.add_parser("report", help="the report of a census folder")
    p.add_argument("folder", type=Path)
    p.add_argument(
        "--cores", type=int, default=None, help="cores of the machine that ran it (default: the run's lane.json, else this one's)"
    )
    ns = parser.parse_args(argv)
    if ns.command == "run":
        if not (ns.venv / "bin" / "python").exists():
            print(f"lane_census: {ns.venv} is not a venv (no bin/python); make one with scripts/setup.sh or pass --venv", file=sys.stderr)
            return 2
        folder = ns.out or Path(tempfile.mkdtemp(prefix="aoti-guard-census-"))
        print(f"lane_census: records in {folder}", flush=True)
        return run(ns.venv.resolve(), folder.resolve(), ns.pytest_args)
    lane = read_lane(ns.folder)
    if not (ns.folder / "tests.jsonl").exists():
        print(f"lane_census: {ns.folder} holds no tests.jsonl (a folder that `run` wrote?)", file=sys.stderr)
        return 2
    print(report(ns.folder, ns.cores or lane.get("cores") or os.cpu_count() or 1, lane.get("wall")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
