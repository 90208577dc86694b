"""Issue 2: what `aoti-guard build` costs over a bare export + compile of the same model.

Three arms, each a fresh interpreter per run (what a release pipeline runs), interleaved:

- ``bare``: ``python bench/_bare_build.py OUT.pt2`` (torch.export.export + aoti_compile_and_package
  of ``aoti_guard.builder.resolve.example.example_spec()``);
- ``build-no-twin``: ``python -m aoti_guard build -o OUT.pt2 --no-debug-twin``;
- ``build``: ``python -m aoti_guard build -o OUT.pt2`` (with the debug twin; on CPU it compiles in a
  child beside the release model, ``aoti_guard/builder/twin/schedule.py``);
- ``build-twin-after``: the same with ``--twin-schedule after`` (the twin compiled after the
  release model, in the build's process: the order before the child, and CUDA's default);
- with ``--baseline DIR``, also ``build-no-twin@base`` and ``build@base``: the same commands run
  with another copy of the project's code (to compare two versions in one run).

Goals: build-no-twin/bare <= 1.15, build/bare <= 2.2 (ratios of the median wall times); the
``build-twin-after`` arm keeps the 2.2 of the twin's old order, to be read beside ``build``.
The breakdown table gives the median time of each phase, from the build's own progress lines and
the bare script's timestamps; "startup + imports" is the rest of the wall time.

    python -m bench.build_overhead [--rounds N | --quick] [--baseline DIR] [--json PATH]
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from bench._common import (
    ROOT,
    Sample,
    arm_record,
    arm_table,
    bare_steps,
    base_parser,
    child_env,
    interleave,
    load_snapshot,
    log,
    machine,
    md_table,
    publish,
    ratio_record,
    ratio_table,
    rounds_of,
    run_timed,
    shown_command,
    wait_for_quiet,
)

GOALS = {"build-no-twin": 1.15, "build": 2.2, "build-twin-after": 2.2}
# runtime_probe/reporting/progress.py's end-of-phase line: "[compile] passed in 14.21s"
_PHASE_LINE = re.compile(r"^\[(\w+)\] (?:passed|warning|failed|skipped) in ([0-9.]+)s$", re.M)


def commands(out_dir: str, suffix: str = "") -> dict[str, list[str]]:
    py = sys.executable
    cmds = {
        "bare": [py, str(ROOT / "bench" / "_bare_build.py"), os.path.join(out_dir, "bare.pt2")],
        "build-no-twin": [py, "-m", "aoti_guard", "build", "-o", os.path.join(out_dir, f"no_twin{suffix}.pt2"), "--no-debug-twin"],
        "build": [py, "-m", "aoti_guard", "build", "-o", os.path.join(out_dir, f"twin{suffix}.pt2")],
        "build-twin-after": [
            *(py, "-m", "aoti_guard", "build", "-o", os.path.join(out_dir, f"twin_after{suffix}.pt2")),
            *("--twin-schedule", "after"),
        ],
    }
    # the baseline's copy may predate --twin-schedule: it runs the two arms every version has
    return cmds if not suffix else {f"{name}@base": cmd for name, cmd in cmds.items() if name in ("build-no-twin", "build")}


def _runner(cmd: list[str], out: str, tree: str | os.PathLike[str]) -> Any:
    def run() -> Sample:
        if os.path.exists(out):
            os.remove(out)
        sample = run_timed(cmd, env=child_env(tree), cwd=tree)
        if not os.path.exists(out):
            raise RuntimeError(f"{' '.join(cmd)} wrote no {out}")
        sample.extra = {"steps": _steps(sample.extra.get("stdout", ""), sample.extra.get("stderr", ""))}
        return sample

    return run


def _steps(stdout: str, stderr: str) -> dict[str, float]:
    """Per-step seconds: the build's '[phase] passed in Xs' lines, or the bare script's JSON line."""
    return {name: float(sec) for name, sec in _PHASE_LINE.findall(stderr)} or bare_steps(stdout)


def breakdown(results: dict[str, list[Sample]]) -> tuple[list[str], list[list[str]]]:
    names = list(results)
    steps: list[str] = []
    for name in names:
        for s in results[name]:
            for k in s.extra.get("steps", {}):
                if k not in steps:
                    steps.append(k)
    rows = []
    for step in steps:
        row = [step]
        for name in names:
            vals = [s.extra["steps"][step] for s in results[name] if step in s.extra.get("steps", {})]
            row.append(f"{statistics.median(vals):.2f}" if vals else "")
        rows.append(row)
    rest = ["startup + imports + exit (rest of the wall time)"]
    for name in names:
        vals = [s.seconds - sum(v for k, v in s.extra.get("steps", {}).items() if k != "import") for s in results[name]]
        rest.append(f"{statistics.median(vals):.2f}")
    rows.append(rest)
    rows.append(["wall", *[f"{statistics.median(s.seconds for s in results[n]):.2f}" for n in names]])
    return ["step (median s)", *names], rows


def render(data: dict[str, Any]) -> str:
    out = [
        arm_table(data["arms"], digits=2, unit="s", cpu=True),
        "",
        ratio_table([(f"`{name}` / `bare`", r) for name, r in data["ratios"].items()]),
        "",
        "Where the time goes (median of the timed rounds; the build's own phase times, the bare script's timestamps):",
        "",
        md_table(data["breakdown"]["headers"], data["breakdown"]["rows"]),
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("aoti-guard build (with and without the debug twin) vs a bare export + compile.", 7, 2)
    args = parser.parse_args(argv)
    rounds = rounds_of(args)
    start = wait_for_quiet(args.max_load, args.max_wait, max_busy=args.max_busy)
    log(f"start: {start['uptime']}")
    out_dir = tempfile.mkdtemp(prefix="bench-build-")
    try:
        cmds = {name: (cmd, ROOT) for name, cmd in commands(out_dir).items()}
        if args.baseline:
            cmds.update({name: (cmd, os.path.abspath(args.baseline)) for name, cmd in commands(out_dir, "_base").items()})
        arms = [(name, _runner(cmd, cmd[cmd.index("-o") + 1] if "-o" in cmd else cmd[-1], tree)) for name, (cmd, tree) in cmds.items()]
        log(f"build_overhead: {args.warmup} warm-up round(s) (fills the Inductor cache for every arm), then {rounds} rounds")
        results = interleave(arms, rounds, warmup=args.warmup)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    end = load_snapshot()
    log(f"end: {end['uptime']}")
    headers, rows = breakdown(results)
    data: dict[str, Any] = {
        "name": "build_overhead",
        "title": "Build overhead (issue 2)",
        "rounds": rounds,
        "warmup": args.warmup,
        "machine": machine(),
        "load_start": start,
        "load_end": end,
        "commands": {name: shown_command(cmd) for name, cmd in commands("OUT").items()},
        "arms": {name: arm_record(samples) for name, samples in results.items()},
        "baseline": os.path.abspath(args.baseline) if args.baseline else None,
        "ratios": {
            arm: ratio_record(results[arm], results["bare"], goal)
            for name, goal in GOALS.items()
            for arm in (name, f"{name}@base")
            if arm in results
        },
        "breakdown": {"headers": headers, "rows": rows},
    }
    data["met"] = all(r["met"] for r in data["ratios"].values())
    data["markdown"] = render(data)
    return publish(data, start, end, args.json)


if __name__ == "__main__":
    sys.exit(main())
