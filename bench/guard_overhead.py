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

Goal (issue 14): at most 2 µs extra per guarded call (the median of the wall times). Each arm
also shows its CPU time per call (this process's user+system time over the block): on a shared
machine, where other jobs take the cores, it is the steadier figure.

    python -m bench.guard_overhead [--rounds N | --quick] [--threads 1] [--package PKG] [--device cuda] [--baseline DIR] [--json PATH]
"""

from __future__ import annotations

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
    add_package_arg,
    arm_record,
    arm_table,
    base_parser,
    interleave,
    load_snapshot,
    log,
    machine,
    md_table,
    measure,
    package_or_example,
    publish,
    ratio_record,
    rounds_of,
    summarize,
    wait_for_quiet,
)
from bench._inputs import call_spec, make_call, read_manifest

GOAL_RATIO = 1.05
GOAL_EXTRA_US = 2.0


def _block(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    calls: int | None,
    block_s: float,
    kwargs: dict[str, Any] | None = None,
    sync: Callable[[], Any] | None = None,
) -> Callable[[], Sample]:
    """One timed block of calls. With ``calls`` None, the first run (the warm-up) sizes the block
    to about ``block_s`` seconds, so that /proc/stat's 10 ms ticks can tell the foreign load.
    ``sync`` (torch.cuda.synchronize) ends each block, so queued GPU work is inside the time."""
    timer = timeit.Timer("fn(*args, **kwargs); sync()", globals={"fn": fn, "args": args, "kwargs": kwargs or {}, "sync": sync or _nothing})
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


def _nothing() -> None:
    return None


def load_baseline(tree: str, package: str, device: str | None) -> Any:
    """``runtime_probe.load(package)`` of another copy of the project, in this process.

    runtime_probe imports itself by absolute name (and some modules only when a function runs),
    so the copy's modules are swapped into ``sys.modules`` for the import and the load, then
    ours are put back; the loaded model keeps the copy's classes and checks."""
    import importlib

    def ours() -> list[str]:
        return [k for k in sys.modules if k == "runtime_probe" or k.startswith("runtime_probe.")]

    saved = {k: sys.modules.pop(k) for k in ours()}
    sys.path.insert(0, os.path.abspath(tree))
    try:
        base = importlib.import_module("runtime_probe")
        if not os.path.abspath(base.__file__ or "").startswith(os.path.abspath(tree)):
            raise RuntimeError(f"no runtime_probe under {tree}")
        return base.load(package, device)
    finally:
        sys.path.remove(os.path.abspath(tree))
        for k in ours():
            del sys.modules[k]
        sys.modules.update(saved)


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
    cpu = data.get("cpu_us")
    if cpu:
        goal_rows.append(
            [
                "`guarded` − `bare`, CPU µs per call",
                f"{cpu['guarded'] - cpu['bare']:+.2f}",
                "",
                f"≤ {GOAL_EXTRA_US:.0f} µs",
                "yes" if cpu["guarded"] - cpu["bare"] <= GOAL_EXTRA_US else "no",
            ]
        )
        if "guarded@base" in cpu:
            goal_rows.append(["`guarded@base` − `bare`, CPU µs per call", f"{cpu['guarded@base'] - cpu['bare']:+.2f}", "", "", ""])
    verdict = "**met**" if data["met"] else "**NOT met**"
    return "\n".join(
        [
            f"{data['threads']} thread(s) (`torch.set_num_threads`), {data['rounds']} interleaved blocks per arm of ~{data['block_s']} s each "
            f"({', '.join(f'{k}: {v}' for k, v in data['calls'].items())} calls); µs per call:",
            "",
            arm_table(data["arms"], digits=1, unit="µs", cpu=False),
            "",
            "CPU µs per call (median over the blocks): " + ", ".join(f"`{k}` {v:.2f}" for k, v in (data.get("cpu_us") or {}).items()),
            "",
            md_table(["measure", "median", "per-block min – max", "goal", "met"], goal_rows),
            "",
            f"Goal (≤ {GOAL_EXTRA_US:.0f} µs extra per call, wall-clock median): {verdict}.",
        ]
    )


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(torch.equal(a, b))


def _diff_record(num: Sequence[Sample], den: Sequence[Sample]) -> dict[str, Any]:
    med = statistics.median(s.seconds for s in num) - statistics.median(s.seconds for s in den)
    paired = [(a.seconds - b.seconds) * 1e6 for a, b in zip(num, den)]
    return {"median_diff": round(med * 1e6, 2), "paired": asdict(summarize(paired))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("The guarded call vs the bare AOTI call, in-process, per call.", 40, 8)
    add_package_arg(parser)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: the device the package was built for)")
    parser.add_argument("--calls", type=int, default=None, help="calls per timed block (default: what takes --block-s)")
    parser.add_argument("--block-s", type=float, default=0.1, help="seconds per timed block when --calls is not given (default 0.1)")
    args = parser.parse_args(argv)
    rounds = rounds_of(args)
    tmp = tempfile.mkdtemp(prefix="bench-guard-")
    try:
        pkg = package_or_example(args.package, tmp)
        import torch

        import runtime_probe

        torch.set_num_threads(args.threads)
        bare = torch._inductor.aoti_load_package(pkg)
        guarded = runtime_probe.load(pkg, args.device)
        inputs, kwargs = make_call(call_spec(read_manifest(pkg), batch=4), args.device or guarded.device.type)
        sync = torch.cuda.synchronize if guarded.device.type == "cuda" else None
        same = _same(bare(*inputs, **kwargs), guarded(*inputs, **kwargs))

        def block(fn: Callable[..., Any]) -> Callable[[], Sample]:
            return _block(fn, inputs, args.calls, args.block_s, kwargs, sync)

        arms = [
            ("bare", block(bare)),
            ("guarded", block(guarded)),
            ("check", block(guarded.check)),
            ("guarded.compiled", block(guarded.compiled)),
        ]
        if args.baseline:
            base = load_baseline(args.baseline, pkg, args.device)
            same = same and _same(bare(*inputs, **kwargs), base(*inputs, **kwargs))
            arms += [("guarded@base", block(base)), ("check@base", block(base.check))]
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
        "title": "Guarded call overhead (issues 3, 14)" + ("" if args.threads == 1 else f", {args.threads} threads (diagnostic)"),
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
    data["cpu_us"] = {
        name: round(statistics.median(s.own_cpu_s / s.extra["calls"] for s in samples) * 1e6, 3) for name, samples in results.items()
    }
    data["met"] = extra["met"]
    data["markdown"] = render(data)
    return publish(data, start, end, args.json)


if __name__ == "__main__":
    sys.exit(main())
