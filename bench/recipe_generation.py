"""The golden input generator's speed (``runtime_probe/golden/recipe.py``): a compact sample's
inputs made from their recipes, at the build and again on the target by the probe.

Three ways of making the same values, interleaved, side by side, each checked equal:
- before 2026-11-25 (night): the hash over 2**22 counters at a time, a new int64 tensor each step;
- that night's change: 2**16 at a time, in place. Measured on ONE thread it was 4x faster; with
  torch's default threads, as a build runs it, every op on 2**16 elements opens a parallel region
  (ATen splits an op of at least 32768 elements, its grain size, over the threads), about a
  hundred thousand of them for gpt2_cache's samples, and on a busy machine each one waits for
  threads the scheduler has put aside: GPU run 20's decoders spent 300 s and more there;
- now: 2**22 at a time, in place: few ops, few regions; slower than 2**16 on an idle machine, and
  neither it nor smaller chunks (under the grain size: no region at all, but many more ops)
  has 2**16's tail on a busy one (docs/benchmarks.md).

    python -m bench.recipe_generation [--mega 12.5] [--rounds 3] [--threads N] [--busy K]

``--mega``: millions of values (12.5: one KV-cache tensor of gpt2_cache's ``max`` sample, which
holds 24 of them). ``--threads``: torch's intra-op threads (default: torch's own default, as in a
build). ``--busy K``: K processes running torch ops on all their threads meanwhile (a machine with
other builds; processes spinning in plain Python do not show the effect).
"""

from __future__ import annotations

import argparse
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
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


def _with_chunk(chunk: int, recipe: InputRecipe, pool: Any) -> Any:
    """The generator as it is, with ``chunk`` counters at a time."""
    kept = R._CHUNK
    R._CHUNK = chunk
    try:
        return R.generate([recipe], {"p": pool})["x"]
    finally:
        R._CHUNK = kept


def _spin() -> None:
    """What another build does to the cores: torch ops on all of torch's threads, without end."""
    x = torch.randn(1 << 22)
    while True:
        x.mul_(1.0000001)


@contextmanager
def _busy(k: int) -> Iterator[None]:
    spawn = multiprocessing.get_context("spawn")  # fresh interpreters: a forked one inherits a used OpenMP pool
    procs = [spawn.Process(target=_spin, daemon=True) for _ in range(k)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.recipe_generation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mega", type=float, default=12.5, help="millions of values to make (default 12.5)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch's intra-op threads (default: torch's default, as a build runs)")
    parser.add_argument("--busy", type=int, default=0, help="processes running torch ops meanwhile (default 0)")
    ns = parser.parse_args(argv)
    if ns.threads:
        torch.set_num_threads(ns.threads)
    n, seed = int(ns.mega * 1e6), 12345
    pool = torch.randn(R.POOL_MAX)
    recipe = InputRecipe(
        input="x", kind="pool", dtype="float32", shape=(n,), stride=(1,), seed=seed, sha256="", pool="p",
        low=None, high=None, keep=None, pad=None, follows=None,
    )  # fmt: skip
    made = R.generate([recipe], {"p": pool})["x"]
    assert torch.equal(_before(n, seed, pool), made), "the generator made other values than before"
    assert torch.equal(_with_chunk(1 << 16, recipe, pool), made), "2**16 at a time made other values"

    arms = [
        ("before (2**22 at a time)", lambda: timed(lambda: _before(n, seed, pool))),
        ("2**16, in place", lambda: timed(lambda: _with_chunk(1 << 16, recipe, pool))),
        (f"now (2**{R._CHUNK.bit_length() - 1} at a time, in place)", lambda: timed(lambda: R.generate([recipe], {"p": pool}))),
    ]
    with _busy(ns.busy):
        results = interleave(arms, ns.rounds, warmup=0)
    busy = f", {ns.busy} process(es) of torch ops beside it" if ns.busy else ""
    title = (
        f"a pool recipe of {n / 1e6:.1f} M float32 values, {torch.get_num_threads()} torch thread(s){busy}, "
        f"median of {ns.rounds} (the same values every way):"
    )
    print(side_by_side(title, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
