"""Issue 3: what the guarded loader adds to every call, in-process, on one thread.

Arms (the bundled example model, x float32 [4, 16] and mask bool [4, 32]), each timed in blocks of
``--calls`` calls with timeit, the blocks of all arms interleaved:

- ``bare``: ``torch._inductor.aoti_load_package(pkg)(x, mask)``;
- ``guarded``: ``runtime_probe.load(pkg)(x, mask)``;
- ``check``: ``model.check(x, mask)`` alone (the pure input-contract check);
- ``guarded.compiled``: ``model.compiled(x, mask)``, torch's callable inside the guarded model
  (a control: it must cost what ``bare`` costs, or the guard calls the model differently);
- with ``--baseline DIR``, also ``guarded@base`` and ``check@base``: another copy's
  runtime_probe, imported alongside, on the same package and inputs.

Goal: guarded/bare <= 1.05, or at most 20 µs extra per call.

    python -m bench.guard_overhead [--rounds N | --quick] [--threads 1] [--package PKG] [--baseline DIR] [--json PATH]
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import timeit
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from bench._common import (
    Sample,
    arm_record,
    arm_table,
    base_parser,
    build_example,
    interleave,
    load_snapshot,
    log,
    machine,
    md_table,
    measure,
    publish,
    ratio_record,
    rounds_of,
    summarize,
    wait_for_quiet,
)

GOAL_RATIO = 1.05
GOAL_EXTRA_US = 20.0


def _block(fn: Callable[..., Any], args: tuple[Any, ...], calls: int | None, block_s: float) -> Callable[[], Sample]:
    """One timed block of calls. With ``calls`` None, the first run (the warm-up) sizes the block
    to about ``block_s`` seconds, so that /proc/stat's 10 ms ticks can tell the foreign load."""
    timer = timeit.Timer("fn(*args)", globals={"fn": fn, "args": args})
    number: list[int] = [calls or 0]

    def run() -> Sample:
        if not number[0]:
            per_call = timer.timeit(number=200) / 200
            number[0] = max(200, int(block_s / per_call))
        n = number[0]
        with measure() as m:
            timer.timeit(number=n)
        return Sample(m["seconds"] / n, m["own_cpu_s"], m["foreign_cores"], {"calls": n})

    return run


def _import_baseline(tree: str) -> Any:
    """The baseline copy's runtime_probe, imported as ``runtime_probe_base`` next to ours (it
    imports itself only relatively, so the two do not mix)."""
    path = os.path.join(os.path.abspath(tree), "runtime_probe")
    spec = importlib.util.spec_from_file_location(
        "runtime_probe_base", os.path.join(path, "__init__.py"), submodule_search_locations=[path]
    )
    if spec is None or spec.loader is None:
        raise RuntimeError(f"no runtime_probe under {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["runtime_probe_base"] = module
    spec.loader.exec_module(module)
    return module


def render(data: dict[str, Any]) -> str:
    r, e = data["ratio"], data["extra_us"]
    goal_rows = [
        [
            "`guarded` / `bare`",
            f"{r['ratio']:.3f}",
            f"{r['paired']['min']:.3f} – {r['paired']['max']:.3f}",
            f"≤ {GOAL_RATIO}",
            "yes" if r["met"] else "no",
        ],
        [
            "`guarded` − `bare`, µs per call",
            f"{e['median_diff']:+.1f}",
            f"{e['paired']['min']:+.1f} – {e['paired']['max']:+.1f}",
            f"≤ {GOAL_EXTRA_US:.0f} µs",
            "yes" if e["met"] else "no",
        ],
        [
            "`guarded.compiled` − `bare`, µs per call (control)",
            f"{data['control_us']['median_diff']:+.1f}",
            f"{data['control_us']['paired']['min']:+.1f} – {data['control_us']['paired']['max']:+.1f}",
            "≈ 0",
            "",
        ],
    ]
    if data.get("baseline_extra_us"):
        b = data["baseline_extra_us"]
        goal_rows.append(
            [
                "`guarded@base` − `bare`, µs per call (the baseline copy)",
                f"{b['median_diff']:+.1f}",
                f"{b['paired']['min']:+.1f} – {b['paired']['max']:+.1f}",
                f"≤ {GOAL_EXTRA_US:.0f} µs",
                "yes" if b["median_diff"] <= GOAL_EXTRA_US else "no",
            ]
        )
    verdict = "**met**" if data["met"] else "**NOT met**"
    return "\n".join(
        [
            f"{data['threads']} thread(s) (`torch.set_num_threads`), {data['rounds']} interleaved blocks per arm of ~{data['block_s']} s each "
            f"({', '.join(f'{k}: {v}' for k, v in data['calls'].items())} calls); µs per call:",
            "",
            arm_table(data["arms"], digits=1, unit="µs", cpu=False),
            "",
            md_table(["measure", "median", "per-block min – max", "goal", "met"], goal_rows),
            "",
            f"Goal (ratio ≤ {GOAL_RATIO} or ≤ {GOAL_EXTRA_US:.0f} µs extra): {verdict}.",
        ]
    )


def _diff_record(num: Sequence[Sample], den: Sequence[Sample]) -> dict[str, Any]:
    med = statistics.median(s.seconds for s in num) - statistics.median(s.seconds for s in den)
    paired = [(a.seconds - b.seconds) * 1e6 for a, b in zip(num, den)]
    return {"median_diff": round(med * 1e6, 2), "paired": asdict(summarize(paired))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("The guarded call vs the bare AOTI call, in-process, per call.", 40, 8)
    parser.add_argument("--package", metavar="PKG", help="an aoti-guard package to use (default: build the example first)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--calls", type=int, default=None, help="calls per timed block (default: what takes --block-s)")
    parser.add_argument("--block-s", type=float, default=0.1, help="seconds per timed block when --calls is not given (default 0.1)")
    args = parser.parse_args(argv)
    rounds = rounds_of(args)
    tmp = tempfile.mkdtemp(prefix="bench-guard-")
    try:
        pkg = os.path.abspath(args.package) if args.package else build_example(tmp)
        import torch

        import runtime_probe

        torch.set_num_threads(args.threads)
        bare = torch._inductor.aoti_load_package(pkg)
        guarded = runtime_probe.load(pkg)
        torch.manual_seed(0)
        inputs = (torch.randn(4, 16), torch.rand(4, 32) > 0.3)
        same = torch.equal(bare(*inputs), guarded(*inputs))
        arms = [
            ("bare", _block(bare, inputs, args.calls, args.block_s)),
            ("guarded", _block(guarded, inputs, args.calls, args.block_s)),
            ("check", _block(guarded.check, inputs, args.calls, args.block_s)),
            ("guarded.compiled", _block(guarded.compiled, inputs, args.calls, args.block_s)),
        ]
        if args.baseline:
            base = _import_baseline(args.baseline).load(pkg)
            same = same and torch.equal(bare(*inputs), base(*inputs))
            arms += [
                ("guarded@base", _block(base, inputs, args.calls, args.block_s)),
                ("check@base", _block(base.check, inputs, args.calls, args.block_s)),
            ]
        start = wait_for_quiet(args.max_load, args.max_wait, max_busy=args.max_busy)
        log(f"start: {start['uptime']}")
        log(f"guard_overhead: {args.threads} thread(s), {args.warmup} warm-up round(s), then {rounds} rounds of {args.calls} calls per arm")
        results = interleave(arms, rounds, warmup=args.warmup, label="µs", scale=1e6)
        end = load_snapshot()
        log(f"end: {end['uptime']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    extra = _diff_record(results["guarded"], results["bare"])
    extra["met"] = extra["median_diff"] <= GOAL_EXTRA_US
    ratio = ratio_record(results["guarded"], results["bare"], GOAL_RATIO)
    data: dict[str, Any] = {
        "name": "guard_overhead" + ("" if args.threads == 1 else f"_threads{args.threads}"),
        "title": "Guarded call overhead (issue 3)" + ("" if args.threads == 1 else f", {args.threads} threads (diagnostic)"),
        "rounds": rounds,
        "warmup": args.warmup,
        "threads": args.threads,
        "calls": {name: samples[0].extra["calls"] for name, samples in results.items()},
        "block_s": args.block_s if args.calls is None else None,
        "same_output": same,
        "machine": machine(),
        "load_start": start,
        "load_end": end,
        "arms": {name: arm_record(samples, scale=1e6) for name, samples in results.items()},
        "ratio": ratio,
        "extra_us": extra,
        "control_us": _diff_record(results["guarded.compiled"], results["bare"]),
        "baseline": os.path.abspath(args.baseline) if args.baseline else None,
        "baseline_extra_us": _diff_record(results["guarded@base"], results["bare"]) if args.baseline else None,
    }
    data["met"] = ratio["met"] or extra["met"]
    data["markdown"] = render(data)
    return publish(data, start, end, args.json)


if __name__ == "__main__":
    sys.exit(main())
