"""Comparing tensors: max abs/rel error, non-finite counts, and the tolerance test.

The test is ``|out - ref| <= atol + rtol * |ref|`` elementwise (torch.allclose's rule), computed in
float64 so that the error itself is not rounded. NaN in ``out`` fails unless ``ref`` has NaN at the
same place and ``equal_nan`` is set. torch is imported by the caller: these run where torch is.

Every elementwise reduction here walks the two tensors in chunks of ``CHUNK`` elements. Done whole,
the float64 copies and their temporaries came to about fifteen times the tensor's own size: for a
language model's logits at full size (gpt2, 32 x 512 tokens: 3.3 GB in float32) that is 50 GB for
one comparison, which is how nine builds at once ran the GPU machine out of memory (docs/zoo.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# Elements per chunk: 4 Mi elements are 32 MB in float64, a few hundred MB with the temporaries.
CHUNK = 1 << 22


def flat_chunks(*tensors: Any, size: int | None = None, device: str | None = None) -> Iterator[tuple[Any, ...]]:
    """Aligned 1-D slices of equally shaped tensors, in row-major order, each copied to ``device``
    (default: the CPU) as it is reached.

    A tensor that is not contiguous is copied once, in its own dtype and on its own device (the
    order of its elements is the logical one, as ``reshape(-1)`` gives it). ``device="cuda"``:
    the arithmetic runs on the GPU, one chunk of each tensor there at a time (a build on CUDA
    compares its outputs there: on the CPU, gpt2's full-size logits took minutes)."""
    step = size or CHUNK
    target = device or "cpu"
    flat = [t.detach().contiguous().view(-1) for t in tensors]
    n = flat[0].numel()
    for start in range(0, n, step):
        yield tuple(f[start : start + step].to(target) for f in flat)


def stats(out: Any, ref: Any, *, atol: float, rtol: float, equal_nan: bool = False, device: str | None = None) -> dict[str, Any]:
    """Compare one output with its reference. Returns JSON-able numbers and ``passed``.
    ``device``: where the arithmetic runs, ``CHUNK`` elements at a time (``flat_chunks``)."""
    result: dict[str, Any] = {"atol": atol, "rtol": rtol}
    if tuple(out.shape) != tuple(ref.shape):
        result.update(passed=False, reason="shape", expected=list(ref.shape), found=list(out.shape))
        return result
    if out.dtype != ref.dtype:
        result.update(
            passed=False, reason="dtype", expected=str(ref.dtype).replace("torch.", ""), found=str(out.dtype).replace("torch.", "")
        )
        return result
    result["numel"] = out.numel()
    if out.numel() == 0:
        result.update(passed=True, max_abs=0.0, max_rel=0.0, nonfinite=0)
        return result
    if not (out.is_floating_point() or out.is_complex()):
        result.update(_exact_stats(out, ref, device))
        return result
    result.update(_float_stats(out, ref, atol, rtol, equal_nan, device))
    return result


def _exact_stats(out: Any, ref: Any, device: str | None) -> dict[str, Any]:
    """Integers and bools: every element must match."""
    import torch

    mismatched, max_abs = 0, 0.0
    for o, r in flat_chunks(out, ref, device=device):
        mismatched += int((o != r).sum().item())
        diff = (o.to(torch.float64) - r.to(torch.float64)).abs() if o.dtype != torch.bool else (o != r).to(torch.float64)
        max_abs = max(max_abs, float(diff.max().item()))
    return {"passed": mismatched == 0, "max_abs": max_abs, "max_rel": 0.0, "nonfinite": 0, "mismatched": mismatched}


def _float_stats(out: Any, ref: Any, atol: float, rtol: float, equal_nan: bool, device: str | None) -> dict[str, Any]:
    import torch

    nonfinite = ref_nonfinite = mismatched = 0
    max_abs = max_rel = 0.0
    worst_value, worst = -float("inf"), 0
    worst_used = 0.0
    offset = 0
    wide = torch.complex128 if out.is_complex() else torch.float64
    for o, r in flat_chunks(out, ref, device=device):
        of, rf = o.to(wide), r.to(wide)
        nonfinite += int((~torch.isfinite(of)).sum().item())
        ref_nonfinite += int((~torch.isfinite(rf)).sum().item())
        same_special = (of == rf) | (torch.isnan(of) & torch.isnan(rf)) if equal_nan else (of == rf)
        diff = (of - rf).abs().to(torch.float64)
        diff = torch.where(same_special, torch.zeros_like(diff), diff)
        diff = torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf"))  # inf vs a finite value is inf, not finfo.max
        ref_abs = rf.abs().to(torch.float64)
        allowed = atol + rtol * torch.nan_to_num(ref_abs, nan=0.0, posinf=0.0)
        excess = diff - allowed
        mismatched += int((excess > 0).sum().item())
        # how much of the tolerance the worst element uses (1.0: exactly at the bound)
        used = torch.where(allowed > 0, diff / allowed.clamp_min(1e-300), torch.full_like(diff, float("inf")))
        used = torch.where(diff == 0, torch.zeros_like(diff), used)
        worst_used = max(worst_used, float(used.max().item()))
        here = int(torch.argmax(excess).item())
        if float(excess[here].item()) > worst_value:  # strictly: the first occurrence wins, as argmax's does
            worst_value, worst = float(excess[here].item()), offset + here
        max_abs = max(max_abs, float(diff.max().item()))
        rel = diff / ref_abs.clamp_min(1e-12)
        max_rel = max(max_rel, float(torch.nan_to_num(rel, nan=0.0, posinf=float("inf")).max().item()))
        offset += o.numel()
    return {
        "passed": mismatched == 0,
        "max_abs": _finite(max_abs),
        "max_rel": _finite(max_rel),
        "nonfinite": nonfinite,
        "ref_nonfinite": ref_nonfinite,
        "mismatched": mismatched,
        "worst_index": _unravel(worst, tuple(out.shape)),
        "tolerance_used": _finite(worst_used),
    }


def max_abs_diff(a: Any, b: Any, *, chunk: int | None = None, device: str | None = None) -> float:
    """max |a - b| in float64, NaN differences read as 0 and +inf ones as 0 (the finite worst)."""
    import torch

    worst = 0.0
    for x, y in flat_chunks(a, b, size=chunk, device=device):
        d = (x.to(torch.float64) - y.to(torch.float64)).abs()
        worst = max(worst, float(torch.nan_to_num(d, nan=0.0, posinf=0.0).max().item()))
    return worst


def max_rel_diff(a: Any, b: Any, *, chunk: int | None = None, device: str | None = None) -> float:
    """max |a - b| / max(|b|, 1e-12) in float64, non-finite ratios read as 0."""
    import torch

    worst = 0.0
    for x, y in flat_chunks(a, b, size=chunk, device=device):
        y64 = y.to(torch.float64)
        d = (x.to(torch.float64) - y64).abs() / y64.abs().clamp_min(1e-12)
        worst = max(worst, float(torch.nan_to_num(d, nan=0.0, posinf=0.0).max().item()))
    return worst


def rmse(a: Any, b: Any, *, chunk: int | None = None, device: str | None = None) -> float:
    """Root mean square of ``a - b`` in float64 (NaN and inf propagate: a non-finite answer)."""
    import torch

    n = a.numel()
    if not n:
        return 0.0
    total = 0.0
    for x, y in flat_chunks(a, b, size=chunk, device=device):
        d = x.to(torch.float64) - y.to(torch.float64)
        total += float((d * d).sum().item())
    return float((total / n) ** 0.5)


def _finite(value: float) -> float | str:
    # JSON has no Infinity: keep it readable and parseable.
    return value if value == value and abs(value) != float("inf") else str(value)


def json_number(value: float | None) -> float | str | None:
    """``value`` as a report or manifest may hold it: inf and NaN as text ("inf"), since JSON has
    neither (the manifest is written with allow_nan=False: a rejected float16 package whose error
    was inf could not be written)."""
    return None if value is None else _finite(value)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return list(reversed(idx))


def nonfinite_count(t: Any) -> int:
    import torch

    if not (t.is_floating_point() or t.is_complex()):
        return 0
    return int((~torch.isfinite(t.detach())).sum().item())  # on the tensor's own device: a bool per element


def same_nonfinite(a: Any, b: Any, *, chunk: int | None = None, device: str | None = None) -> bool:
    """``a`` and ``b`` are non-finite in the same places, with the same values there (+inf with
    +inf, NaN with NaN). Integers and other shapes than each other's: True when both have none."""
    import torch

    if not (a.is_floating_point() or a.is_complex()) or tuple(a.shape) != tuple(b.shape):
        return nonfinite_count(a) == 0 and nonfinite_count(b) == 0
    for x, y in flat_chunks(a, b, size=chunk, device=device):
        bad_x, bad_y = ~torch.isfinite(x), ~torch.isfinite(y)
        if not torch.equal(bad_x, bad_y):
            return False
        both = bad_x & bad_y
        if both.any() and not bool(((x[both] == y[both].to(x.dtype)) | (torch.isnan(x[both]) & torch.isnan(y[both]))).all()):
            return False
    return True
