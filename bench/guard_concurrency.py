"""Issue 14: the guarded model called from several threads, as a serving process does.

For 1, 4 and 16 threads (``--threads``), each arm runs every thread for ``--seconds``, each thread
calling the model on its own inputs; the arms (``bare``: torch's ``aoti_load_package``;
``guarded``: ``runtime_probe.load``) alternate round by round. Throughput is calls per second over
all threads. Every 16th call of every thread is compared with the bare model's output on the same
inputs (computed once beforehand): the run fails if any differs.

The guard holds no lock on the call path (its per-call state is local), so its throughput should
scale as the bare model's does; with one runner (torch's default) the native call itself is
serialised inside AOTI for both arms.

    python -m bench.guard_concurrency [--package PKG] [--device cuda] [--threads 1,4,16] [--seconds 2] [--rounds N | --quick] [--json PATH]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench._common import (
    Sample,
    add_package_arg,
    base_parser,
    interleave,
    load_snapshot,
    log,
    machine,
    md_table,
    measure,
    package_or_example,
    publish,
    rounds_of,
    wait_for_quiet,
)
from bench._inputs import call_spec, make_call, read_manifest

CHECK_EVERY = 16


def _equal(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(torch.equal(a, b))


def _arm(
    model: Callable[..., Any], calls: list[tuple[tuple[Any, ...], dict[str, Any]]], refs: list[Any], seconds: float, sync: Any
) -> Callable[[], Sample]:
    """One round: len(calls) threads call ``model`` for ``seconds``; a Sample of calls/s."""

    def run() -> Sample:
        counts = [0] * len(calls)
        wrong: list[int] = []
        start = threading.Barrier(len(calls) + 1)
        stop = threading.Event()

        def worker(k: int) -> None:
            args, kwargs = calls[k]
            start.wait()
            n = 0
            while not stop.is_set():
                out = model(*args, **kwargs)
                n += 1
                if n % CHECK_EVERY == 0 and not _equal(out, refs[k]):
                    wrong.append(k)
            sync()
            counts[k] = n

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(calls))]
        for t in threads:
            t.start()
        with measure() as m:
            start.wait()
            time.sleep(seconds)
            stop.set()
            for t in threads:
                t.join()
        if wrong:
            raise SystemExit(f"threads {sorted(set(wrong))} got outputs that differ from the bare model's")
        total = sum(counts)
        return Sample(m["seconds"] / max(total, 1), m["own_cpu_s"], m["foreign_cores"], {"calls": total, "per_s": total / m["seconds"]})

    return run


def render(data: dict[str, Any]) -> str:
    rows = []
    for n, r in data["by_threads"].items():
        rows.append([n, f"{r['bare']:.0f}", f"{r['guarded']:.0f}", f"{r['ratio']:.3f}", f"{r['ratio_min']:.3f} – {r['ratio_max']:.3f}"])
    return "\n".join(
        [
            f"{data['device']}, {data['rounds']} rounds of {data['seconds']} s per arm and thread count, torch intra-op threads "
            f"{data['torch_threads']}; every {CHECK_EVERY}th call compared with the bare output: all equal.",
            "",
            md_table(["threads", "bare calls/s (median)", "guarded calls/s (median)", "guarded / bare", "per-round min – max"], rows),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("Throughput of the guarded vs the bare model from several threads.", 5, 2)
    add_package_arg(parser)
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: the package's)")
    parser.add_argument("--threads", default="1,4,16", help="comma-separated thread counts (default 1,4,16)")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per arm and round (default 2)")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    args = parser.parse_args(argv)
    rounds = rounds_of(args)
    tmp = tempfile.mkdtemp(prefix="bench-conc-")
    try:
        pkg = package_or_example(args.package, tmp)
        import torch

        import runtime_probe

        torch.set_num_threads(args.torch_threads)
        guarded = runtime_probe.load(pkg, args.device)
        device = str(guarded.device)
        bare = torch._inductor.aoti_load_package(pkg, device_index=guarded.device.index if guarded.device.index is not None else -1)
        sync = torch.cuda.synchronize if guarded.device.type == "cuda" else (lambda: None)
        spec = call_spec(read_manifest(pkg), batch=4)
        counts = [int(n) for n in args.threads.split(",")]
        calls = [make_call(spec, device, seed=k) for k in range(max(counts))]
        refs = [bare(*a, **kw) for a, kw in calls]
        if not all(_equal(guarded(*a, **kw), r) for (a, kw), r in zip(calls, refs)):
            raise SystemExit("the guarded model's outputs differ from the bare model's")
        arms = []
        for n in counts:
            arms.append((f"bare x{n}", _arm(bare, calls[:n], refs[:n], args.seconds, sync)))
            arms.append((f"guarded x{n}", _arm(guarded, calls[:n], refs[:n], args.seconds, sync)))
        start = wait_for_quiet(args.max_load, args.max_wait, max_busy=args.max_busy)
        results = interleave(arms, rounds, warmup=args.warmup, label="µs/call", scale=1e6)
        end = load_snapshot()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    by_threads: dict[str, Any] = {}
    for n in counts:
        b, g = results[f"bare x{n}"], results[f"guarded x{n}"]
        paired = [gs.extra["per_s"] / bs.extra["per_s"] for gs, bs in zip(g, b)]
        bare_med = statistics.median(s.extra["per_s"] for s in b)
        guarded_med = statistics.median(s.extra["per_s"] for s in g)
        by_threads[str(n)] = {
            "bare": round(bare_med, 1),
            "guarded": round(guarded_med, 1),
            "ratio": round(guarded_med / bare_med, 3),
            "ratio_min": round(min(paired), 3),
            "ratio_max": round(max(paired), 3),
        }
    data: dict[str, Any] = {
        "name": "guard_concurrency",
        "title": "Guarded vs bare throughput from several threads (issue 14)",
        "rounds": rounds,
        "warmup": args.warmup,
        "seconds": args.seconds,
        "device": device,
        "torch_threads": args.torch_threads,
        "machine": machine(),
        "load_start": start,
        "load_end": end,
        "by_threads": by_threads,
    }
    data["markdown"] = render(data)
    log("done")
    return publish(data, start, end, args.json)


if __name__ == "__main__":
    sys.exit(main())
