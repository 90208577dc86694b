"""Issue 3: what the container pre-flight costs over loading the package and running it once.

Two arms, each a fresh interpreter per run, interleaved, on the same package:

- ``bare``: ``python bench/_bare_load.py PKG`` (import torch, aoti_load_package, one call);
- ``probe-fast``: ``python -m runtime_probe --fast PKG``;
- with ``--baseline DIR``, also ``probe-fast@base``: the same command with another copy's code.

Goal: probe-fast/bare <= 1.3 (ratio of the median wall times). The package is the bundled
example, built once at the start (not timed) unless ``--package`` names one. After the timed
rounds, one untimed run of each with timestamps (the probe with ``--json``) gives the breakdown.

    python -m bench.probe_fast [--rounds N | --quick] [--package PKG] [--baseline DIR] [--json PATH]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from bench._common import (
    ROOT,
    Sample,
    add_package_arg,
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
    package_or_example,
    publish,
    ratio_record,
    ratio_table,
    rounds_of,
    run_timed,
    shown_command,
    wait_for_quiet,
)

GOAL = 1.3


def commands(pkg: str) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "bare": [py, str(ROOT / "bench" / "_bare_load.py"), pkg],
        "probe-fast": [py, "-m", "runtime_probe", "--fast", pkg],
    }


def _runner(cmd: list[str], tree: str | os.PathLike[str] = ROOT) -> Any:
    return lambda: run_timed(cmd, env=child_env(tree), cwd=tree)


def profile_once(pkg: str, tmp: str) -> dict[str, Any]:
    """One untimed run of each arm with its step times: the bare script's timestamps, the
    probe's phase seconds from --json. 'rest' is the wall time outside those steps."""
    cmds = commands(pkg)
    bare = run_timed(cmds["bare"], env=child_env(), cwd=ROOT)
    report = os.path.join(tmp, "probe.json")
    probe = run_timed([*cmds["probe-fast"], "--json", report], env=child_env(), cwd=ROOT)
    with open(report, encoding="utf-8") as fh:
        phases = json.load(fh)["phases"]
    probe_steps = {p["name"]: float(p["seconds"]) for p in phases if p.get("status") != "skipped"}
    load_detail = next((p.get("detail") or {} for p in phases if p["name"] == "load"), {})
    return {
        "bare": {"wall": bare.seconds, "steps": bare_steps(str(bare.extra.get("stdout", "")))},
        "probe-fast": {"wall": probe.seconds, "steps": probe_steps, "child_load_s": load_detail.get("seconds")},
    }


def render(data: dict[str, Any]) -> str:
    ratios = [("`probe-fast` / `bare`", data["ratio"])]
    if data.get("baseline_ratio"):
        ratios.append(("`probe-fast@base` / `bare`", data["baseline_ratio"]))
    prof = data["profile"]
    prof_rows = []
    for arm in ("bare", "probe-fast"):
        steps = prof[arm]["steps"]
        for k, v in steps.items():
            prof_rows.append([arm, k, f"{v:.2f}"])
        prof_rows.append(
            [arm, "rest: interpreter start, imports outside the steps, exit", f"{prof[arm]['wall'] - sum(steps.values()):.2f}"]
        )
        prof_rows.append([arm, "**wall**", f"**{prof[arm]['wall']:.2f}**"])
    return "\n".join(
        [
            arm_table(data["arms"], digits=2, unit="s", cpu=True),
            "",
            ratio_table(ratios),
            "",
            "One untimed run of each with its step times (the probe's phases from `--json`; its `host` phase waits for the "
            "child's torch import, its `load` phase includes the child's import of torch's package loader):",
            "",
            md_table(["arm", "step", "s"], prof_rows),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("python -m runtime_probe --fast vs a bare load + one call.", 7, 2)
    add_package_arg(parser)
    args = parser.parse_args(argv)
    rounds = rounds_of(args)
    tmp = tempfile.mkdtemp(prefix="bench-probe-")
    try:
        pkg = package_or_example(args.package, tmp)
        start = wait_for_quiet(args.max_load, args.max_wait, max_busy=args.max_busy)
        log(f"start: {start['uptime']}")
        arms = [(name, _runner(cmd)) for name, cmd in commands(pkg).items()]
        if args.baseline:
            arms.append(("probe-fast@base", _runner(commands(pkg)["probe-fast"], os.path.abspath(args.baseline))))
        log(f"probe_fast: {args.warmup} warm-up round(s), then {rounds} rounds")
        results: dict[str, list[Sample]] = interleave(arms, rounds, warmup=args.warmup)
        profile = profile_once(pkg, tmp)
        end = load_snapshot()
        log(f"end: {end['uptime']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    data: dict[str, Any] = {
        "name": "probe_fast",
        "title": "Pre-flight probe (issue 3)",
        "rounds": rounds,
        "warmup": args.warmup,
        "machine": machine(),
        "load_start": start,
        "load_end": end,
        "package": args.package or "the bundled example, built by `python -m aoti_guard build` (with its debug twin)",
        "commands": {name: shown_command(cmd) for name, cmd in commands("PKG").items()},
        "arms": {name: arm_record(samples) for name, samples in results.items()},
        "ratio": ratio_record(results["probe-fast"], results["bare"], GOAL),
        "baseline": os.path.abspath(args.baseline) if args.baseline else None,
        "baseline_ratio": ratio_record(results["probe-fast@base"], results["bare"], GOAL) if args.baseline else None,
        "profile": profile,
    }
    data["met"] = data["ratio"]["met"]
    data["markdown"] = render(data)
    return publish(data, start, end, args.json)


if __name__ == "__main__":
    sys.exit(main())
