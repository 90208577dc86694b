"""What ``--cpu-isa`` costs in speed: one model compiled at each ISA level this CPU can run,
timed side by side, as ratios to the ``native`` build.

    python bench/cpu_isa_cost.py [--runs 200]

Each level is compiled with the Inductor configs aoti-guard uses for it
(aoti_guard/builder/targets.py: ``cpp.march`` + ``cpp.simdlen``), loaded with torch's loader, and
timed on the same inputs (median of ``--runs`` calls after a warm-up). Levels this CPU lacks
(x86-64-v4 without AVX-512) are skipped: their code dies with SIGILL here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def _cpu_flags() -> set[str]:
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    import torch

    from aoti_guard.builder.compile import has_config
    from aoti_guard.builder.targets import CPU_ISA_LEVELS, cpu_isa_configs

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 512), torch.nn.Softmax(dim=-1)
    ).eval()
    x = torch.randn(64, 512)
    ep = torch.export.export(model, (x,))
    levels = [lvl for lvl in CPU_ISA_LEVELS if lvl != "x86-64-v4" or "avx512f" in _cpu_flags()]
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for level in levels:
            path = os.path.join(tmp, f"{level}.pt2")
            torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=cpu_isa_configs(level, has_config))
            compiled = torch._inductor.aoti_load_package(path)
            for _ in range(20):
                compiled(x)
            samples = []
            for _ in range(args.runs):
                started = time.perf_counter()
                compiled(x)
                samples.append(time.perf_counter() - started)
            times[level] = statistics.median(samples)
    base = times["native"]
    print(f"torch {torch.__version__}, {args.runs} runs, median per call; CPU flags avx512f={'avx512f' in _cpu_flags()}")
    print(f"{'level':<12} {'ms/call':>10} {'vs native':>10}")
    for level, t in times.items():
        print(f"{level:<12} {t * 1e3:>10.3f} {t / base:>10.2f}x")
    skipped = [lvl for lvl in CPU_ISA_LEVELS if lvl not in times]
    if skipped:
        print(f"skipped (this CPU cannot run them): {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
