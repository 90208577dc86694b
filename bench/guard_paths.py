"""Issue 14: the options for the guarded call's input check, measured side by side in one process.

Each arm is timed in blocks of calls with this thread's CPU clock (``time.thread_time``): the
check runs on the calling thread, and on a shared machine the CPU clock does not count the time
other jobs hold the core (the wall clock does; bench/guard_overhead.py gives the wall figures).
Arms, interleaved round by round:

- ``rules``: the diagnosing path (guard/rules.py, one closure per rule family): every call's cost
  before the fast path;
- ``fast``: the generated check of the whole signature (guard/fastpath.py), alone;
- ``check``: ``GuardedModel.check``: the fast path with its dispatch, what a call pays;
- ``tensorguards``: a prototype of another option, torch's own C++ guard of Dynamo
  (``torch._C._dynamo.guards.TensorGuards``: exact type, dispatch keys, dtype, device, static sizes
  and strides in one C++ call) plus the symbolic sizes in Python; only where torch has it;
- ``bare`` and ``bare+cpp_checks``: torch's loader without and with AOTI's generated C++ input
  checks (``AOTI_RUNTIME_CHECK_INPUTS=1``, read at a loaded model's first run): their difference is
  what those checks cost;
- with ``--baseline DIR``: ``check@base``, another copy's ``GuardedModel.check``.

    python -m bench.guard_paths [--package PKG] [--device cuda] [--rounds N | --quick] [--baseline DIR] [--json PATH]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench._common import (
    Sample,
    _busy_seconds,
    add_package_arg,
    arm_record,
    base_parser,
    interleave,
    load_snapshot,
    log,
    machine,
    md_table,
    package_or_example,
    publish,
    rounds_of,
    wait_for_quiet,
)
from bench._inputs import call_spec, make_call, read_manifest
from bench.guard_overhead import load_baseline

Call = tuple[tuple[Any, ...], dict[str, Any]]


def _cpu_block(fn: Callable[..., Any], call: Call, block_s: float) -> Callable[[], Sample]:
    """Blocks of calls timed with this thread's CPU clock, sized to ~block_s on the first run."""
    args, kwargs = call
    number = [0]

    def run_n(n: int) -> float:
        t0 = time.thread_time()
        for _ in range(n):
            fn(*args, **kwargs)
        return time.thread_time() - t0

    def run() -> Sample:
        if not number[0]:
            number[0] = max(200, int(block_s / max(run_n(200) / 200, 1e-7)))
        n = number[0]
        busy0, w0 = _busy_seconds(), time.perf_counter()
        cpu = run_n(n)
        wall = time.perf_counter() - w0
        foreign = max(0.0, (_busy_seconds() - busy0 - cpu) / wall) if wall > 0 else 0.0
        return Sample(cpu / n, cpu, foreign, {"calls": n, "wall_per_call": wall / n})

    return run


def tensorguards_check(manifest: Any, device: Any, torch: Any) -> Callable[..., Any] | None:
    """The prototype: Dynamo's C++ TensorGuards for what is static, Python for the symbols.
    Positional tensor-only contracts with contiguous layouts; None otherwise."""
    try:
        from torch._C._dynamo.guards import TensorGuards
    except ImportError:
        return None
    specs = [i for i in manifest.io.inputs if i.tensor is not None]
    if len(specs) != len(manifest.io.inputs) or any(p.passed != "positional" for p in manifest.io.params):
        return None
    examples, sizes, strides, symbolic = [], [], [], []
    for k, spec in enumerate(specs):
        t = spec.tensor
        shape = [d if isinstance(d, int) else max(d.min, 2) for d in t.shape]
        examples.append(torch.empty(shape, dtype=getattr(torch, t.dtype), device=device))
        sizes.append([d if isinstance(d, int) else None for d in t.shape])
        strides.append([s if isinstance(s, int) else None for s in t.stride])
        symbolic += [(k, i, d.expr, d.min, d.max) for i, d in enumerate(t.shape) if not isinstance(d, int)]
    guards = TensorGuards(*examples, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides)

    def check(*args: Any) -> bool:
        if not guards.check(*args):
            return False
        bound: dict[str, int] = {}
        for k, i, expr, lo, hi in symbolic:
            size = args[k].shape[i]
            if size < lo or (hi is not None and size > hi) or bound.setdefault(expr, size) != size:
                return False
        return True

    return check


def _bare_models(pkg: str, torch: Any, call: Call) -> tuple[Any, Any]:
    """(bare, bare with AOTI's C++ input checks on): the env var is read at each model's first run."""
    args, kwargs = call
    bare = torch._inductor.aoti_load_package(pkg)
    bare(*args, **kwargs)
    os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = "1"
    try:
        checked = torch._inductor.aoti_load_package(pkg)
        checked(*args, **kwargs)
    finally:
        del os.environ["AOTI_RUNTIME_CHECK_INPUTS"]
    return bare, checked


def render(data: dict[str, Any]) -> str:
    cpu = {k: v["summary"]["median"] for k, v in data["arms"].items()}
    rows = [[f"`{k}`", f"{v:.2f}", f"{data['arms'][k]['summary']['min']:.2f}", f"{data['wall_us'][k]:.2f}"] for k, v in cpu.items()]
    derived = [["`bare+cpp_checks` − `bare`", f"{cpu['bare+cpp_checks'] - cpu['bare']:+.2f}", "AOTI's own C++ input checks"]]
    derived.append(["`check` − `fast`", f"{cpu['check'] - cpu['fast']:+.2f}", "the dispatch around the fast path"])
    derived.append(["`rules` / `fast`", f"{cpu['rules'] / cpu['fast']:.2f}×", "the diagnosing path against the fast path"])
    if "tensorguards" in cpu:
        derived.append(["`tensorguards` / `fast`", f"{cpu['tensorguards'] / cpu['fast']:.2f}×", "Dynamo's C++ guard + Python symbols"])
    if "check@base" in cpu:
        derived.append(["`check` / `check@base`", f"{cpu['check'] / cpu['check@base']:.2f}×", "this tree against the baseline copy"])
    return "\n".join(
        [
            f"{data['rounds']} interleaved blocks per arm, µs per call ({data['device']}; CPU clock of the calling thread; "
            f"calls per block: {', '.join(f'{k} {v}' for k, v in data['calls'].items())}):",
            "",
            md_table(["arm", "CPU µs (median)", "CPU µs (min)", "wall µs (median)"], rows),
            "",
            md_table(["comparison", "value", "what"], derived),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("The input-check options of the guarded call, side by side (CPU clock).", 30, 6)
    add_package_arg(parser)
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: the package's)")
    parser.add_argument("--block-s", type=float, default=0.05, help="CPU seconds per timed block (default 0.05)")
    args = parser.parse_args(argv)
    rounds = rounds_of(args)
    tmp = tempfile.mkdtemp(prefix="bench-paths-")
    try:
        pkg = package_or_example(args.package, tmp)
        import torch

        import runtime_probe

        torch.set_num_threads(1)
        guarded = runtime_probe.load(pkg, args.device)
        call = make_call(call_spec(read_manifest(pkg), batch=4), str(guarded.device))
        checker = guarded.checker
        bare, checked = _bare_models(pkg, torch, call)
        arms: list[tuple[str, Callable[[], Sample]]] = [
            ("rules", _cpu_block(checker.check_slow, call, args.block_s)),
            ("fast", _cpu_block(checker.fast or checker.check_slow, call, args.block_s)),
            ("check", _cpu_block(guarded.check, call, args.block_s)),
            ("bare", _cpu_block(bare, call, args.block_s)),
            ("bare+cpp_checks", _cpu_block(checked, call, args.block_s)),
        ]
        proto = tensorguards_check(guarded.manifest, guarded.device, torch)
        if proto is not None and proto(*call[0]):
            arms.append(("tensorguards", _cpu_block(proto, call, args.block_s)))
        if args.baseline:
            arms.append(("check@base", _cpu_block(load_baseline(args.baseline, pkg, args.device).check, call, args.block_s)))
        start = wait_for_quiet(args.max_load, args.max_wait, max_busy=args.max_busy)
        results = interleave(arms, rounds, warmup=args.warmup, label="CPU µs", scale=1e6)
        end = load_snapshot()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    data: dict[str, Any] = {
        "name": "guard_paths",
        "title": "Input-check options of the guarded call (issue 14)",
        "rounds": rounds,
        "warmup": args.warmup,
        "device": str(guarded.device),
        "machine": machine(),
        "load_start": start,
        "load_end": end,
        "calls": {k: v[0].extra["calls"] for k, v in results.items()},
        "arms": {k: arm_record(v, scale=1e6) for k, v in results.items()},
        "wall_us": {k: round(statistics.median(s.extra["wall_per_call"] for s in v) * 1e6, 3) for k, v in results.items()},
    }
    data["markdown"] = render(data)
    log("done")
    return publish(data, start, end, args.json)


if __name__ == "__main__":
    sys.exit(main())
