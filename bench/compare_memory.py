"""What comparing one large output costs: the build's comparisons (``runtime_probe.numerics.stats``,
the tolerance gathering, the float64 distances) on the whole tensor at once, against the same code
in chunks of ``numerics.CHUNK`` elements (what validation does since 2026-11-23), and, where a GPU
answers, the chunks' arithmetic on it (what a CUDA build does). The outputs are on the CPU in
every arm, as validation reads them back from its child.

Each arm runs in a child of its own, so that its peak resident memory (ru_maxrss) is its own; the
growth of the peak over the two tensors' creation is printed as a multiple of one tensor's size,
with the time, for each arm and as ratios (whole / that arm).

    python -m bench.compare_memory [--mb 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap

_ARM = textwrap.dedent(
    """
    import json, resource, sys, time, torch
    from runtime_probe import numerics
    from aoti_guard.builder.validate.golden import ToleranceStats
    n, how = int(sys.argv[1]), sys.argv[2]
    device = "cuda" if how == "chunked-cuda" else None
    if how == "whole":
        numerics.CHUNK = n  # one chunk: the whole tensor at once, as before
    a = torch.randn(n)
    b = a.clone()
    b.mul_(1.0001)  # in place: no temporary raises the peak before the measure
    peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    base = peak()
    started = time.perf_counter()
    numerics.stats(a, b, atol=1e-5, rtol=1e-5, device=device)
    ToleranceStats("logits", "float32", device).add(a, b)
    numerics.max_abs_diff(a, b, device=device)
    numerics.rmse(a, b, device=device)
    seconds = time.perf_counter() - started
    print(json.dumps({"growth": (peak() - base) / (4 * n), "seconds": seconds}))
    """
)


def _arm(n: int, how: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", _ARM, str(n), how], capture_output=True, text=True, check=True, timeout=900)
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="the size of the compared float32 output (default 200 MB)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cuda", action="store_true", help="add the arm that runs the chunks' arithmetic on the GPU")
    ns = parser.parse_args(argv)
    n = ns.mb * (1 << 20) // 4
    runs: dict[str, list[dict[str, float]]] = {"whole": [], "chunked": []}
    if ns.cuda:
        runs["chunked-cuda"] = []
    for _ in range(ns.rounds):  # interleaved
        for how in runs:
            runs[how].append(_arm(n, how))
    med = {how: {k: statistics.median(r[k] for r in rs) for k in ("growth", "seconds")} for how, rs in runs.items()}
    print(f"comparing one float32 output of {ns.mb} MB ({n} elements), median of {ns.rounds} rounds")
    print(f"{'arm':<14}{'peak growth (x output)':>24}{'seconds':>10}{'whole / arm: memory':>22}{'time':>8}")
    for how, m in med.items():
        ratio_time = med["whole"]["seconds"] / max(m["seconds"], 1e-9)
        # under 1% of the output, the peak is the process's own noise: no ratio is claimed
        ratio_mem = f"{med['whole']['growth'] / m['growth']:.1f}" if m["growth"] >= 0.01 else "-"
        print(f"{how:<14}{m['growth']:>24.2f}{m['seconds']:>10.2f}{ratio_mem:>22}{ratio_time:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
