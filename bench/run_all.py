"""Run every benchmark and write docs/benchmarks.md.

    python -m bench.run_all [--quick] [--out docs/benchmarks.md] [--baseline DIR]

Waits for a quiet machine, builds the example package once (untimed) for the probe and guard
benchmarks, then runs, each as its own process: build_overhead, probe_fast, guard_overhead (one
thread: the goal), guard_overhead with two threads (a diagnostic: what thread wake-ups do to a
per-call number on a shared 2-core machine), guard_paths (the input-check options),
guard_concurrency (1/4/16 threads) and cold_start (fresh processes). The results replace everything in the output file up
to the end marker; what follows the marker (notes written by hand) is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._common import ROOT, build_example, child_env, load_snapshot, log, md_table, wait_for_quiet

END_MARKER = "<!-- end of generated results: notes below this line are kept by bench/run_all.py -->"
REGENERATE = "python -m bench.run_all"


def _run(module: str, extra: Sequence[str], json_path: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", module, *extra, "--json", json_path]
    log(f"$ {' '.join(shlex.quote(c) for c in cmd)}")
    proc = subprocess.run(cmd, env={**os.environ, **child_env()}, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{module} failed with exit code {proc.returncode}")
    with open(json_path, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    data["argv"] = ["python", "-m", module, *extra]
    return data


def _load_line(snap: dict[str, Any]) -> str:
    one, five, fifteen = snap["load"]
    busy = f", {snap['busy_cores']:.2f} cores busy elsewhere over 5 s" if "busy_cores" in snap else ""
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}{busy} ({snap['time']})"


def _goal_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for r in results:
        if r["name"] == "build_overhead":
            for arm in ("build-no-twin", "build"):
                q = r["ratios"][arm]
                rows.append([f"`{arm}` / `bare` wall time", f"≤ {q['goal']}", f"{q['ratio']:.3f}", "yes" if q["met"] else "**NO**"])
        elif r["name"] == "probe_fast":
            q = r["ratio"]
            rows.append(["`probe --fast` / `bare` load + run", f"≤ {q['goal']}", f"{q['ratio']:.3f}", "yes" if q["met"] else "**NO**"])
        elif r["name"] == "guard_overhead":
            q, e = r["ratio"], r["extra_us"]
            rows.append(
                [
                    "guarded / bare call (1 thread)",
                    "≤ 2 µs extra",
                    f"{q['ratio']:.3f}, {e['median_diff']:+.1f} µs",
                    "yes" if r["met"] else "**NO**",
                ]
            )
    return rows


def render(results: list[dict[str, Any]], start: dict[str, Any], end: dict[str, Any], argv: Sequence[str], seconds: float) -> str:
    m = results[0]["machine"]
    out = [
        "# Benchmarks",
        "",
        "Regenerate (about 10 minutes on the 2-core dev machine; best on an otherwise idle machine, it waits for one):",
        "",
        "```bash",
        f". .venv/bin/activate && {REGENERATE}",
        "```",
        "",
        "`--quick` runs fewer rounds (a smoke run, not a result). Each script also runs alone: `python -m bench.build_overhead`,",
        "`python -m bench.probe_fast`, `python -m bench.guard_overhead` (`--help` for options). Arms run interleaved, their order",
        "rotating each round, after an untimed warm-up round of every arm (the Inductor cache is warm for all of them). Times are",
        "wall-clock. *Foreign load* is the CPU the rest of the machine used while a sample ran (system-wide busy time from",
        "`/proc/stat` minus the benchmark's own CPU time, including the processes it started), in cores: 0 is a quiet machine,",
        "2 means the other engineer's jobs took both cores.",
        "",
        f"## Last run: {time.strftime('%Y-%m-%d %H:%M %Z')}",
        "",
        md_table(
            ["", ""],
            [
                ["command", f"`{' '.join(argv)}` ({seconds / 60:.0f} min)"],
                ["machine", f"{m['cores']} cores, {m['cpu']}; {m['platform']}"],
                ["software", f"torch {m['torch']}, Python {m['python']}"],
                ["load at start (1 / 5 / 15 min)", _load_line(start)],
                ["load at end", _load_line(end)],
            ],
        ),
        "",
        md_table(["goal", "target", "measured (median)", "met"], _goal_rows(results)),
        "",
    ]
    for i, r in enumerate(results, 1):
        out += [f"### {i}. {r['title']}", ""]
        out.append(f"`{' '.join(r['argv'])}`: {r['rounds']} timed rounds after {r['warmup']} warm-up round(s).")
        out.append(f"Load (1 / 5 / 15 min) at start {_load_line(r['load_start'])}; at end {_load_line(r['load_end'])}.")
        if r.get("commands"):
            out += ["", "Arms:", ""]
            out += [f"- `{name}`: `{cmd}`" for name, cmd in r["commands"].items()]
        out += ["", r["markdown"], ""]
    out.append(END_MARKER)
    return "\n".join(out) + "\n"


def _kept_notes(path: Path) -> str:
    if not path.exists():
        return "\n"
    text = path.read_text(encoding="utf-8")
    return text.split(END_MARKER, 1)[1] if END_MARKER in text else "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run every benchmark and write docs/benchmarks.md.")
    p.add_argument("--quick", action="store_true", help="fewer rounds everywhere (a smoke run, not a result)")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"), help="the Markdown file to write (default docs/benchmarks.md)")
    p.add_argument("--baseline", metavar="DIR", help="also run another copy of the project as '@base' arms (see each script's --help)")
    p.add_argument("--max-wait", type=float, default=900.0, help="seconds to wait for a quiet machine first (default 900)")
    args = p.parse_args(argv)
    started = time.monotonic()
    start = wait_for_quiet(1.5, args.max_wait)
    log(f"start: {start['uptime']}")
    quick = ["--quick"] if args.quick else []
    common = [*quick, *(["--baseline", args.baseline] if args.baseline else [])]
    tmp = tempfile.mkdtemp(prefix="bench-all-")
    try:
        pkg = build_example(tmp)
        results = [
            _run("bench.build_overhead", common, os.path.join(tmp, "build.json")),
            _run("bench.probe_fast", [*common, "--package", pkg], os.path.join(tmp, "probe.json")),
            _run("bench.guard_overhead", [*common, "--package", pkg], os.path.join(tmp, "guard.json")),
            _run("bench.guard_overhead", [*common, "--package", pkg, "--threads", "2"], os.path.join(tmp, "guard2.json")),
            _run("bench.guard_paths", [*common, "--package", pkg], os.path.join(tmp, "paths.json")),
            _run("bench.guard_concurrency", [*quick, "--package", pkg], os.path.join(tmp, "concurrency.json")),
            _run("bench.cold_start", [*quick, "--package", pkg, "--rounds", "3", "--warmup", "0"], os.path.join(tmp, "cold.json")),
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    end = load_snapshot()
    log(f"end: {end['uptime']}")
    for r in results:  # the package path was a temporary one
        r["argv"] = [a if a != pkg else "PKG" for a in r["argv"]]
    shown = ["python", "-m", "bench.run_all", *(sys.argv[1:] if argv is None else argv)]
    out = Path(args.out)
    text = render(results, start, end, shown, time.monotonic() - started) + "\n" + _kept_notes(out).lstrip("\n")
    out.write_text(text, encoding="utf-8")
    print(f"uptime at start: {start['uptime']}")
    print(f"uptime at end:   {end['uptime']}")
    print(f"wrote {out}")
    print(md_table(["goal", "target", "measured (median)", "met"], _goal_rows(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
