"""The golden input generator's speed (``runtime_probe/golden/recipe.py``): a compact sample's
inputs made from their recipes, at the build and again on the target by the probe. Before
2026-11-25 (night) the hash ran over 2**22 counters at a time in fresh int64 temporaries (32 MB
each, out of the CPU's cache); now over 2**16 in place. Both made here, interleaved, side by side,
on one thread, with the same values checked.

    python -m bench.recipe_generation [--mega 12.5] [--rounds 3]

``--mega``: millions of values (12.5: one KV-cache tensor of gpt2_cache's ``max`` sample, which
holds 24 of them; that sample's inputs took most of the 47 s before its samples were listed in its
GPU build, docs/gpu-validation.md run 19).
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from bench._common import interleave, side_by_side, timed
from runtime_probe.golden import recipe as R
from runtime_probe.package.manifest import InputRecipe

_M31 = 0x7FFFFFFF


def _hash31_before(start: int, count: int, seed: int) -> Any:
    """The hash as it was: the same arithmetic, a new tensor for every step."""
    i = torch.arange(start, start + count, dtype=torch.int64)
    x = ((i & _M31) * 0x2545F491 + (seed & _M31)) & _M31
    x = x ^ (((i >> 31) * 0x6B43A9B5) & _M31)
    x = x ^ (x >> 15)
    x = (x * 0x2C1B3C6D) & _M31
    x = x ^ (x >> 12)
    x = (x * 0x297A2D39) & _M31
    return x ^ (x >> 15)


def _before(n: int, seed: int, pool: Any) -> Any:
    flat = torch.empty(n, dtype=torch.float32)
    for start in range(0, n, 1 << 22):
        count = min(1 << 22, n - start)
        flat[start : start + count] = pool[_hash31_before(start, count, seed) % pool.numel()]
    return flat


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.recipe_generation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mega", type=float, default=12.5, help="millions of values to make (default 12.5)")
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args(argv)
    torch.set_num_threads(1)
    n, seed = int(ns.mega * 1e6), 12345
    pool = torch.randn(R.POOL_MAX)
    recipe = InputRecipe(
        input="x", kind="pool", dtype="float32", shape=(n,), stride=(1,), seed=seed, sha256="", pool="p",
        low=None, high=None, keep=None, pad=None, follows=None,
    )  # fmt: skip
    assert torch.equal(_before(n, seed, pool), R.generate([recipe], {"p": pool})["x"]), "the generator made other values than before"

    arms = [
        ("before (2**22 at a time)", lambda: timed(lambda: _before(n, seed, pool))),
        ("now (2**16, in place)", lambda: timed(lambda: R.generate([recipe], {"p": pool}))),
    ]
    results = interleave(arms, ns.rounds, warmup=0)
    title = f"a pool recipe of {n / 1e6:.1f} M float32 values, one thread, median of {ns.rounds} (the same values both ways):"
    print(side_by_side(title, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
