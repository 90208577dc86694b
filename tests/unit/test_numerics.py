"""runtime_probe.runtime.numerics and the build's tolerance gathering: chunked reductions give the same
answers as whole-tensor ones, and their memory does not grow with the tensor.

At full size one comparison of gpt2's logits (3.3 GB in float32) made float64 copies and
temporaries of about fifteen times that; nine builds at once ran the GPU machine out of memory.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
import torch

from aoti_guard.builder.golden import ATOL_FLOOR, MARGIN, RTOL_FLOOR, ToleranceStats, excess_error
from runtime_probe.runtime import numerics


def _pair(shape: tuple[int, ...], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(shape, generator=g)
    return ref + 1e-4 * torch.randn(shape, generator=g), ref


@pytest.mark.parametrize("chunk", [1, 7, 64, None])
def test_chunked_stats_equal_one_chunk(chunk: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    out, ref = _pair((6, 5, 4))
    flat_out = out.reshape(-1)
    flat_out[3], flat_out[17], flat_out[40] = float("nan"), float("inf"), flat_out[40] + 5.0  # the worst, in a later chunk
    ref.reshape(-1)[17] = float("inf")
    whole = _chunked(monkeypatch, out.numel(), out, ref, atol=1e-5, rtol=1e-5)
    assert _chunked(monkeypatch, chunk, out, ref, atol=1e-5, rtol=1e-5) == whole
    assert whole["worst_index"] == [0, 0, 3]  # flat 3: the NaN's excess is inf, the first of the largest
    assert whole["nonfinite"] == 2 and whole["ref_nonfinite"] == 1
    assert whole["passed"] is False and whole["max_abs"] == "inf"


def _chunked(monkeypatch: pytest.MonkeyPatch, chunk: int | None, out: torch.Tensor, ref: torch.Tensor, **rule: Any) -> dict[str, Any]:
    """``numerics.stats`` walking ``chunk`` elements at a time (None: the module's own chunk)."""
    with monkeypatch.context() as m:
        if chunk is not None:
            m.setattr(numerics, "CHUNK", chunk)
        return numerics.stats(out, ref, **rule)


def test_worst_index_is_the_first_largest_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = torch.zeros(4, 10)
    out = ref.clone()
    out[1, 2] = 3.0
    out[3, 9] = 3.0  # as large, later: argmax keeps the first
    out[0, 0] = 1.0
    got = _chunked(monkeypatch, 3, out, ref, atol=0.0, rtol=0.0)
    assert got["worst_index"] == [1, 2] and got["mismatched"] == 3 and got["max_abs"] == 3.0


def test_chunked_stats_on_transposed_and_exact_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    out, ref = _pair((8, 9))
    assert _chunked(monkeypatch, 5, out.t(), ref.t(), atol=0.0, rtol=0.0) == numerics.stats(
        out.t().contiguous(), ref.t().contiguous(), atol=0.0, rtol=0.0
    )
    ints = torch.arange(30).reshape(5, 6)
    other = ints.clone()
    other[4, 5] = 99
    got = _chunked(monkeypatch, 4, other, ints, atol=0.0, rtol=0.0)
    assert got["passed"] is False and got["mismatched"] == 1 and got["max_abs"] == 70.0


def test_chunked_reductions_match_whole_tensor_formulas() -> None:
    out, ref = _pair((33, 17), seed=3)
    d = (out.double() - ref.double()).abs()
    assert numerics.max_abs_diff(out, ref, chunk=10) == float(d.max())
    assert numerics.max_rel_diff(out, ref, chunk=10) == pytest.approx(float((d / ref.double().abs().clamp_min(1e-12)).max()))
    assert numerics.rmse(out, ref, chunk=10) == pytest.approx(float(torch.sqrt((d * d).mean())), rel=1e-12)
    assert numerics.rmse(torch.tensor([float("nan")]), torch.tensor([0.0])) != numerics.rmse(torch.ones(1), torch.zeros(1))


def test_tolerance_gathered_per_sample_follows_the_rule_over_all_pairs() -> None:
    pairs = [_pair((4, 7), seed=s) for s in range(3)]
    pairs[1][0][2, 3] += 0.5
    gathered = ToleranceStats("logits", "float32")
    for c, e in pairs:
        gathered.add(c, e)
    # against whole-tensor formulas over all the pairs at once (the docs' tolerance rule)
    diffs = [(c.double() - e.double()).abs() for c, e in pairs]
    excess = max(float((d - RTOL_FLOOR["float32"] * e.double().abs()).clamp_min(0).max()) for d, (_c, e) in zip(diffs, pairs))
    tol = gathered.tolerance()
    assert tol.atol == pytest.approx(max(ATOL_FLOOR["float32"], MARGIN * excess)) and tol.rtol == RTOL_FLOOR["float32"]
    assert tol.measured_abs == max(float(d.max()) for d in diffs)
    assert gathered.excess == max(excess_error(c, e, 1.3e-6) for c, e in pairs) > 0.49
    assert ToleranceStats("ids", "int64").tolerance().atol == 0.0


_PEAK = textwrap.dedent(
    """
    import resource, sys, torch
    from runtime_probe.runtime import numerics
    from aoti_guard.builder.golden import ToleranceStats
    numerics.CHUNK = 1 << 18  # 2 MB in float64: the fixed cost stays far under the tensor's size
    n = 25_000_000
    a = torch.randn(n)
    b = a.clone()
    b.mul_(1.0001)  # in place: no temporary raises the peak before the measure
    peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    base = peak()
    which = sys.argv[1]
    if which == "stats":
        numerics.stats(a, b, atol=1e-5, rtol=1e-5)
    elif which == "tolerance":
        ToleranceStats("o", "float32").add(a, b)
    else:
        numerics.rmse(a, b)
    print((peak() - base) / (4 * n))
    """
)


@pytest.mark.parametrize("which", ["stats", "tolerance", "rmse"])
def test_comparing_a_large_output_needs_no_copy_of_it(which: str) -> None:
    """Whole-tensor float64 temporaries grew the peak by about 14-17x the tensor's size for stats
    (measured on this code before it was chunked, and with ``numerics.CHUNK`` at the tensor's
    size: docs/benchmarks.md, "Comparing one large output"); chunked, by a fraction of it."""
    proc = subprocess.run([sys.executable, "-c", _PEAK, which], capture_output=True, text=True, timeout=300, check=True)
    growth = float(proc.stdout.strip().splitlines()[-1])
    # whole-tensor: stats ~14-17x, the tolerance ~10x, rmse ~6x; chunked: 0.15-0.5x (allocator noise included)
    assert growth < 2.0, f"{which}: peak memory grew by {growth:.2f}x the compared tensor"
