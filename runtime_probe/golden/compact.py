"""A reference output too large to store, in compact form: a fixed subset of its elements and its
statistics, checked with tolerances derived from the elementwise rule.

The elementwise rule is ``|out - ref| <= atol + rtol*|ref|``. An output that passes it everywhere
also passes every check here, so a compact sample never fails a target that a full one passes:
- the subset: the same rule on the stored elements (a fixed spread of positions, plus the
  positions where the build's compiled output was furthest from eager);
- ``nonfinite``: the count of NaN/Inf must match (elementwise, a non-finite value passes only
  where the reference holds the same one, so the finite elements are the same set);
- over the n finite elements, ``|sum_t - sum_r| <= n*atol + rtol*sum|r| + slack`` (the sum of the
  elementwise bounds) and the same for ``sum|x|`` (since ||t| - |r|| <= |t - r|);
- ``|min_t - min_r|`` and ``|max_t - max_r|`` at most ``atol + rtol*max|r|`` (+ rounding);
where ``slack`` bounds float64 summation's rounding: n * 2**-52 * (sum|r| + sum|t|), sum|t| at
most (1 + rtol)*sum|r| + n*atol.

torch is imported by the caller's process (these run where torch is).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime_probe.runtime import numerics as _numerics

__all__ = ["SPREAD", "WORST", "Bound", "check", "positions", "reference_stats", "tolerances", "worst_positions"]

SPREAD = 1024  # evenly spread elements of each output stored
WORST = 8  # and the build's worst-error positions
_EPS = 2.0**-52


def positions(numel: int, worst: Sequence[int] = ()) -> list[int]:
    """The stored positions (row-major): every one of a small output; else ``SPREAD`` evenly
    spread, the last, and ``worst``."""
    if numel <= SPREAD + WORST:
        return list(range(numel))
    spread = {k * numel // SPREAD for k in range(SPREAD)} | {numel - 1}
    return sorted(spread | {int(w) for w in worst if 0 <= int(w) < numel})


def worst_positions(compiled: Any, eager: Any, rtol: float, device: str | None = None, k: int = WORST) -> list[int]:
    """The ``k`` positions where ``|compiled - eager| - rtol*|eager|`` is largest (non-finite
    differences first), chunk by chunk."""
    import torch

    if compiled.numel() == 0 or compiled.shape != eager.shape or compiled.is_complex():
        return []
    best: list[tuple[float, int]] = []
    offset = 0
    for c, e in _numerics.flat_chunks(compiled, eager, device=device):
        cf, ef = c.to(torch.float64), e.to(torch.float64)
        excess = torch.nan_to_num((cf - ef).abs() - rtol * ef.abs().nan_to_num(0.0, 0.0, 0.0), nan=math.inf)
        excess = torch.where((cf == ef) | (cf.isnan() & ef.isnan()), torch.full_like(excess, -math.inf), excess)
        top = torch.topk(excess, min(k, excess.numel()))
        best += [(float(v), offset + int(i)) for v, i in zip(top.values.tolist(), top.indices.tolist()) if v > -math.inf]
        best = sorted(best, key=lambda p: (-p[0], p[1]))[:k]
        offset += c.numel()
    return [i for _, i in best]


def reference_stats(ref: Any, device: str | None = None) -> dict[str, Any]:
    """nonfinite, count (finite), sum, abs_sum, min, max, max_abs over the finite elements, in
    float64 (None where there is no finite element)."""
    import torch

    nonfinite, count = 0, 0
    total = abs_total = 0.0
    lo, hi, top = math.inf, -math.inf, 0.0
    for (r,) in _numerics.flat_chunks(ref, device=device):
        rf = r.to(torch.float64)
        finite = torch.isfinite(rf)
        nonfinite += int((~finite).sum().item())
        vals = rf[finite]
        if vals.numel():
            count += vals.numel()
            total += float(vals.sum().item())
            abs_total += float(vals.abs().sum().item())
            lo, hi = min(lo, float(vals.min().item())), max(hi, float(vals.max().item()))
            top = max(top, float(vals.abs().max().item()))
    usable = count > 0 and math.isfinite(total) and math.isfinite(abs_total)
    return {
        "nonfinite": nonfinite,
        "count": count,
        "sum": total if usable else None,
        "abs_sum": abs_total if usable else None,
        "min": lo if count else None,
        "max": hi if count else None,
        "max_abs": top,
    }


def tolerances(stats: Mapping[str, Any], atol: float, rtol: float) -> tuple[float, float]:
    """(sum_tol, minmax_tol) for a reference's ``stats`` under the elementwise (atol, rtol)."""
    n = int(stats.get("count") or 0)
    abs_sum = float(stats.get("abs_sum") or 0.0)
    top = float(stats.get("max_abs") or 0.0)
    target_abs = (1.0 + rtol) * abs_sum + n * atol
    slack = n * _EPS * (abs_sum + target_abs)
    sum_tol = n * atol + rtol * abs_sum + slack
    minmax_tol = atol + rtol * top + 4 * _EPS * (top + atol)
    return sum_tol, minmax_tol


@dataclass(frozen=True)
class Bound:
    """The elementwise rule an output is held to: ``|out - ref| <= atol + rtol*|ref|``, a NaN
    equal to a NaN where ``equal_nan``."""

    atol: float
    rtol: float
    equal_nan: bool = False


def check(out: Any, digest: Mapping[str, Any], indices: Any, values: Any, bound: Bound, *, device: str | None) -> dict[str, Any]:
    """One output against its digest (``indices``, ``values``: its stored elements): the
    elementwise rule on the stored elements, then the statistics. Returns the golden phase's
    entry (``passed``, ``max_abs``... and ``compact``: what was checked, and ``stats_failed``:
    each statistic out of its tolerance)."""
    import torch

    atol, rtol = bound.atol, bound.rtol
    result: dict[str, Any] = {"atol": atol, "rtol": rtol}
    shape = list(digest.get("shape") or [])
    if list(out.shape) != shape:
        return {**result, "passed": False, "reason": "shape", "expected": shape, "found": list(out.shape)}
    dtype = str(out.dtype).replace("torch.", "")
    if dtype != digest.get("dtype"):
        return {**result, "passed": False, "reason": "dtype", "expected": digest.get("dtype"), "found": dtype}
    flat_index = indices.to(torch.int64)
    picked = out.detach().reshape(-1)[flat_index.to(out.device)].to("cpu")
    sub = _numerics.stats(picked, values, atol=atol, rtol=rtol, equal_nan=bound.equal_nan)
    worst = sub.get("worst_index")
    if worst:
        sub["worst_index"] = _unravel(int(flat_index[_flat(worst, picked.numel())].item()), tuple(out.shape))
    got = reference_stats(out, device=device)
    sum_tol, minmax_tol = float(digest.get("sum_tol") or 0.0), float(digest.get("minmax_tol") or 0.0)
    failed: list[str] = []
    if got["nonfinite"] != digest.get("nonfinite"):
        failed.append(f"{got['nonfinite']} NaN/Inf value(s), the reference {digest.get('nonfinite')}")
    for key, tol in (("sum", sum_tol), ("abs_sum", sum_tol), ("min", minmax_tol), ("max", minmax_tol)):
        want, have = digest.get(key), got[key]
        if want is None:
            continue
        if have is None or not abs(have - want) <= tol:
            failed.append(f"{key} {have!r}, the reference {want!r} (tolerance {tol:.3g})")
    result.update(sub)
    result["compact"] = {
        "elements": int(flat_index.numel()),
        "of": out.numel(),
        "stats": [k for k in ("sum", "abs_sum", "min", "max") if digest.get(k) is not None],
    }
    result["stats_failed"] = failed
    result["passed"] = bool(sub.get("passed")) and not failed
    result["nonfinite"] = got["nonfinite"]  # the whole output's, not the subset's
    result["ref_nonfinite"] = digest.get("nonfinite")
    return result


def _flat(index: Sequence[int], numel: int) -> int:
    """The subset's 1-D worst index (stats gives it unravelled over the 1-D subset)."""
    return min(int(index[0]), max(numel - 1, 0))


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for n in reversed(shape):
        out.append(flat % n if n else 0)
        flat = flat // n if n else 0
    return out[::-1]
