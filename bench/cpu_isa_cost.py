"""What ``--cpu-isa`` costs in speed: one model compiled at each ISA level this CPU can run,
timed side by side, as ratios to the ``native`` build.

    python bench/cpu_isa_cost.py [--runs 200]

Each level is compiled with the Inductor configs aoti-guard uses for it
(aoti_guard/builder/compile/targets.py: ``cpp.march`` + ``cpp.simdlen``), loaded with torch's loader, and
timed on the same inputs (median of ``--runs`` calls after a warm-up). Levels this CPU lacks
(x86-64-v4 without AVX-512) are skipped: their code dies with SIGILL here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def torch_nn_module() -> type:
    import torch

    return torch.nn.Module


def _cpu_flags() -> set[str]:
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


class _Pointwise(torch_nn_module()):  # type: ignore[misc]
    def forward(self, x):  # type: ignore[no-untyped-def]
        import torch

        y = torch.nn.functional.gelu(x) * torch.sigmoid(x) + torch.sin(x)
        return torch.softmax(y, dim=-1) + torch.log1p(y.abs())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    import torch

    from aoti_guard.builder.compile.aoti import has_config
    from aoti_guard.builder.compile.targets import CPU_ISA_LEVELS, cpu_isa_configs

    torch.manual_seed(0)
    models = {
        # GEMMs run in ATen's BLAS whatever the level: the level only reaches the fused kernels around them
        "mlp": (
            torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 512)).eval(),
            torch.randn(64, 512),
        ),
        # pointwise and reductions only: all of it is Inductor's generated (vectorised or scalar) code
        "pointwise": (_Pointwise().eval(), torch.randn(256, 4096)),
    }
    levels = [lvl for lvl in CPU_ISA_LEVELS if lvl != "x86-64-v4" or "avx512f" in _cpu_flags()]
    times: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (model, x) in models.items():
            ep = torch.export.export(model, (x,))
            loaded = {}
            for level in levels:
                path = os.path.join(tmp, f"{name}-{level}.pt2")
                torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=cpu_isa_configs(level, has_config))
                loaded[level] = torch._inductor.aoti_load_package(path)
                for _ in range(10):
                    loaded[level](x)
            samples: dict[str, list[float]] = {level: [] for level in levels}
            for _ in range(args.runs):  # interleaved: a noisy neighbour slows every level alike
                for level in levels:
                    started = time.perf_counter()
                    loaded[level](x)
                    samples[level].append(time.perf_counter() - started)
            for level in levels:
                times[(name, level)] = statistics.median(samples[level])
    print(f"torch {torch.__version__}, {args.runs} interleaved runs, median per call; CPU flags avx512f={'avx512f' in _cpu_flags()}")
    print(f"{'model':<10} {'level':<12} {'ms/call':>10} {'vs native':>10}")
    for (name, level), t in times.items():
        print(f"{name:<10} {level:<12} {t * 1e3:>10.3f} {t / times[(name, 'native')]:>10.2f}x")
    skipped = [lvl for lvl in CPU_ISA_LEVELS if lvl not in levels]
    if skipped:
        print(f"skipped (this CPU cannot run them): {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
