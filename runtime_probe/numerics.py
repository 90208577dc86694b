"""Comparing tensors: max abs/rel error, non-finite counts, and the tolerance test.

The test is ``|out - ref| <= atol + rtol * |ref|`` elementwise (torch.allclose's rule), computed in
float64 so that the error itself is not rounded. NaN in ``out`` fails unless ``ref`` has NaN at the
same place and ``equal_nan`` is set. torch is imported by the caller: these run where torch is.
"""

from __future__ import annotations

from typing import Any


def stats(out: Any, ref: Any, *, atol: float, rtol: float, equal_nan: bool = False) -> dict[str, Any]:
    """Compare one output with its reference. Returns JSON-able numbers and ``passed``."""
    import torch

    result: dict[str, Any] = {"atol": atol, "rtol": rtol}
    if tuple(out.shape) != tuple(ref.shape):
        result.update(passed=False, reason="shape", expected=list(ref.shape), found=list(out.shape))
        return result
    if out.dtype != ref.dtype:
        result.update(
            passed=False, reason="dtype", expected=str(ref.dtype).replace("torch.", ""), found=str(out.dtype).replace("torch.", "")
        )
        return result
    o = out.detach().to("cpu")
    r = ref.detach().to("cpu")
    result["numel"] = o.numel()
    if o.numel() == 0:
        result.update(passed=True, max_abs=0.0, max_rel=0.0, nonfinite=0)
        return result
    if not (o.is_floating_point() or o.is_complex()):
        mismatched = int((o != r).sum().item())
        diff = (o.to(torch.float64) - r.to(torch.float64)).abs() if o.dtype != torch.bool else (o != r).to(torch.float64)
        result.update(passed=mismatched == 0, max_abs=float(diff.max().item()), max_rel=0.0, nonfinite=0, mismatched=mismatched)
        return result
    of = o.to(torch.complex128 if o.is_complex() else torch.float64)
    rf = r.to(of.dtype)
    finite_out = torch.isfinite(of)
    nonfinite = int((~finite_out).sum().item())
    same_special = (of == rf) | (torch.isnan(of) & torch.isnan(rf)) if equal_nan else (of == rf)
    diff = (of - rf).abs().to(torch.float64)
    diff = torch.where(same_special, torch.zeros_like(diff), diff)
    diff = torch.nan_to_num(diff, nan=float("inf"))
    ref_abs = rf.abs().to(torch.float64)
    bound = atol + rtol * torch.nan_to_num(ref_abs, nan=0.0, posinf=0.0)
    excess = diff - bound
    ok = bool((excess <= 0).all().item())
    rel = diff / ref_abs.clamp_min(1e-12)
    worst = int(torch.argmax(excess).item())
    result.update(
        passed=ok,
        max_abs=_finite(float(diff.max().item())),
        max_rel=_finite(float(torch.nan_to_num(rel, nan=0.0, posinf=float("inf")).max().item())),
        nonfinite=nonfinite,
        ref_nonfinite=int((~torch.isfinite(rf)).sum().item()),
        mismatched=int((excess > 0).sum().item()),
        worst_index=_unravel(worst, tuple(o.shape)),
    )
    return result


def _finite(value: float) -> float | str:
    # JSON has no Infinity: keep it readable and parseable.
    return value if value == value and abs(value) != float("inf") else str(value)


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
    return int((~torch.isfinite(t.detach())).sum().item())
