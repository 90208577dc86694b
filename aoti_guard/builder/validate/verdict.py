"""The three-way verdict: eager, AOTInductor and ONNX Runtime, output by output and sample by sample.

Two results *agree* when they pass the build's comparison rule (compare.py): allclose within the
build's tolerance (tolerance.py: --atol/--rtol, else the dtype's default), or, failing that, the result is about as close to
the float64 reference as eager is (RMSE within 3x of eager's, plus atol/10). Per (sample, output):

  AOTI~eager  ORT~eager  verdict
  yes         yes        agree      all agree                                   -> pass
  no          yes        compiler   AOTI alone disagrees with two agreeing refs -> likely a compiler problem
  any         no         numerics   eager and ONNX Runtime disagree             -> model numerics or nondeterminism
  any         (none)     none       ONNX Runtime has no result for this sample

How it gates the build: ``compiler`` is an error (``build.compiler_suspect``; the build already fails
on compiled vs eager, this names the likely cause and suggests --minify); ``numerics`` is a warning
(``build.reference_disagrees``): the build passes or fails on compiled vs eager alone; all
``agree`` is one info finding (``build.references_agree``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aoti_guard.builder.validate.tolerance import ToleranceRule
from runtime_probe.package.manifest import IOContract
from runtime_probe.reporting.findings import Finding, error, info, warning

__all__ = [
    "AGREE",
    "COMPILER",
    "NONE",
    "NUMERICS",
    "Pair",
    "Results",
    "SampleRuns",
    "ThreeWay",
    "classify",
    "close_to_fp64",
    "compare_pair",
    "judge_sample",
    "three_way",
]

AGREE, COMPILER, NUMERICS, NONE = "agree", "compiler", "numerics", "none"
PHASE = "validate"


@dataclass(frozen=True)
class Pair:
    """One pairwise comparison: max abs/rel error (a string for inf/nan, None when shapes differ)."""

    max_abs: float | str | None
    max_rel: float | str | None
    agree: bool
    reason: str | None = None  # "shape" / "dtype" when they cannot be compared elementwise


@dataclass(frozen=True)
class ThreeWay:
    sample: str
    output: str
    aoti_eager: Pair
    ort_eager: Pair | None
    aoti_ort: Pair | None
    verdict: str

    def columns(self) -> dict[str, Any]:
        """The columns this adds to a validation table row."""
        out: dict[str, Any] = {"reference_verdict": self.verdict}
        if self.ort_eager is not None and self.aoti_ort is not None:
            out.update(
                ort_vs_eager_max_abs=self.ort_eager.max_abs,
                ort_vs_eager_max_rel=self.ort_eager.max_rel,
                aoti_vs_ort_max_abs=self.aoti_ort.max_abs,
                aoti_vs_ort_max_rel=self.aoti_ort.max_rel,
            )
        return out


def _rmse(a: Any, b: Any, device: str | None = None) -> float:
    from runtime_probe.runtime import numerics as _numerics

    return _numerics.rmse(a, b, device=device)


def close_to_fp64(out: Any, eager: Any, ref64: Any, atol: float, device: str | None = None) -> tuple[bool, float, float]:
    """(out is about as close to float64 as eager is, RMSE eager vs fp64, RMSE out vs fp64);
    ``device``: where the arithmetic runs.

    Never where ``out`` and ``eager`` are non-finite in different places: eager's overflow makes
    its RMSE infinite, which would let any finite ``out`` through (float16 ``y / x`` after ``x * x``
    overflowed: eager inf, an Inductor that kept the product in float32 300, float64 300)."""
    from runtime_probe.runtime import numerics as _numerics

    e_err, o_err = _rmse(eager, ref64, device), _rmse(out, ref64, device)
    if not _numerics.same_nonfinite(out, eager, device=device):
        return False, e_err, o_err
    return math.isfinite(o_err) and o_err <= 3.0 * e_err + atol / 10.0, e_err, o_err


def compare_pair(out: Any, ref: Any, ref64: Any = None, *, atol: float, rtol: float, equal_nan: bool = False) -> Pair:
    """Compare ``out`` with ``ref`` by the build's rule (``ref64``: float64 reference of ``ref``'s
    model, used when allclose fails)."""
    import torch

    from runtime_probe.runtime import numerics as _numerics

    st = _numerics.stats(out, ref, atol=atol, rtol=rtol, equal_nan=equal_nan)
    agree = bool(st.get("passed"))
    reason = st.get("reason")
    if not agree and reason is None and isinstance(ref64, torch.Tensor) and ref64.is_floating_point() and ref64.shape == out.shape:
        agree = close_to_fp64(out, ref, ref64, atol)[0]
    return Pair(st.get("max_abs"), st.get("max_rel"), agree, reason)


def classify(aoti_eager: bool, ort_eager: bool | None) -> str:
    if ort_eager is None:
        return NONE
    if not ort_eager:
        return NUMERICS
    return AGREE if aoti_eager else COMPILER


@dataclass(frozen=True)
class Results:
    """One output's results on one sample: eager's, AOTInductor's, ONNX Runtime's (None: it has
    none for this sample) and the float64 reference (None: not computed)."""

    eager: Any
    aoti: Any
    ort: Any
    ref64: Any = None


def three_way(sample: str, output: str, results: Results, *, atol: float, rtol: float, equal_nan: bool = False) -> ThreeWay:
    """Compare the three results of one output on one sample (``results.ort`` None: no ORT result)."""
    eager, aoti, ort = results.eager, results.aoti, results.ort
    a_e = compare_pair(aoti, eager, results.ref64, atol=atol, rtol=rtol, equal_nan=equal_nan)
    if ort is None:
        return ThreeWay(sample, output, a_e, None, None, NONE)
    o_e = compare_pair(ort, eager, results.ref64, atol=atol, rtol=rtol, equal_nan=equal_nan)
    a_o = compare_pair(aoti, ort, None, atol=atol, rtol=rtol, equal_nan=equal_nan)
    return ThreeWay(sample, output, a_e, o_e, a_o, classify(a_e.agree, o_e.agree))


def _worst(values: Sequence[float | str | None]) -> str:
    nums = [v for v in values if isinstance(v, float | int)]
    strs = [v for v in values if isinstance(v, str)]
    if strs:
        return strs[0]
    return f"{max(nums):.3g}" if nums else "-"


def _pairs_text(rows: Sequence[ThreeWay]) -> str:
    a_e = _worst([r.aoti_eager.max_abs for r in rows])
    o_e = _worst([r.ort_eager.max_abs for r in rows if r.ort_eager is not None])
    a_o = _worst([r.aoti_ort.max_abs for r in rows if r.aoti_ort is not None])
    return f"max abs error AOTI vs eager {a_e}, ONNX Runtime vs eager {o_e}, AOTI vs ONNX Runtime {a_o}"


def _evidence(output: str, rows: Sequence[ThreeWay]) -> dict[str, Any]:
    return {"output": output, "samples": [r.sample for r in rows], "rows": [{"sample": r.sample, **r.columns()} for r in rows]}


def verdict_findings(results: Sequence[ThreeWay], *, minify: bool = False) -> list[Finding]:
    """Findings for a set of three-way results: per output for ``compiler`` and ``numerics``, one
    overall info when everything compared agrees. ``minify``: the minifier will run (hint)."""
    findings: list[Finding] = []
    outputs = list(dict.fromkeys(r.output for r in results))
    for name in outputs:
        rows = [r for r in results if r.output == name]
        compiler = [r for r in rows if r.verdict == COMPILER]
        numerics = [r for r in rows if r.verdict == NUMERICS]
        if compiler:
            findings.append(
                error(
                    "build.compiler_suspect",
                    PHASE,
                    f"output {name!r}: eager and ONNX Runtime agree, AOTInductor alone differs on {len(compiler)} of {len(rows)} sample(s) "
                    f"({', '.join(r.sample for r in compiler)}): likely a compiler problem",
                    expected="AOTInductor agrees with eager and ONNX Runtime",
                    found=_pairs_text(compiler),
                    hint=("the minify phase reduces it to a small repro" if minify else "rerun with --minify to reduce it to a small repro")
                    + " for a PyTorch issue; a different --inductor-config may avoid it meanwhile",
                    evidence=_evidence(name, compiler),
                )
            )
        if numerics:
            aoti_ok = [r for r in numerics if r.aoti_eager.agree]
            eager_odd = [r for r in numerics if not r.aoti_eager.agree and r.aoti_ort is not None and r.aoti_ort.agree]
            if len(aoti_ok) == len(numerics):
                how = "AOTInductor agrees with eager"
            elif len(eager_odd) == len(numerics):
                how = "AOTInductor agrees with ONNX Runtime, eager is the odd one out"
            else:
                how = "the three differ"
            findings.append(
                warning(
                    "build.reference_disagrees",
                    PHASE,
                    f"output {name!r}: eager and ONNX Runtime disagree on {len(numerics)} of {len(rows)} sample(s) "
                    f"({', '.join(r.sample for r in numerics)}); {how}: model numerics or nondeterminism, not necessarily the compiler",
                    found=_pairs_text(numerics),
                    hint="look for nondeterministic or ill-conditioned operations (uninitialized memory, large sums of mixed signs, "
                    "division by small values); the build's pass/fail rests on compiled vs eager alone",
                    evidence=_evidence(name, numerics),
                )
            )
    compared = [r for r in results if r.verdict != NONE]
    if compared and all(r.verdict == AGREE for r in compared):
        samples = list(dict.fromkeys(r.sample for r in compared))
        findings.append(
            info(
                "build.references_agree",
                PHASE,
                f"eager, AOTInductor and ONNX Runtime agree on {len(outputs)} output(s) of {len(samples)} sample(s) ({_pairs_text(compared)})",
                evidence={"samples": samples},
            )
        )
    return findings


@dataclass(frozen=True)
class SampleRuns:
    """One sample's outputs other than eager's, in contract order: the compiled model's, ONNX
    Runtime's (None: it has no result for the sample) and the float64 reference's (None)."""

    compiled: Sequence[Any]
    ort: Sequence[Any] | None
    refs64: Sequence[Any] | None = None


def judge_sample(
    contract: IOContract, s: Any, runs: SampleRuns, rows: Sequence[dict[str, Any]], *, tolerance: ToleranceRule
) -> list[ThreeWay]:
    """Three-way verdicts for one sample's outputs, by the build's ``tolerance``; adds the ONNX
    Runtime columns to that sample's table ``rows`` (in place). NaN/Inf at the same places count
    as agreement here: non-finite outputs are reported on their own (build.nonfinite)."""
    import torch

    def at(values: Sequence[Any] | None, k: int) -> Any:
        return values[k] if values is not None and k < len(values) else None

    by_output = {row["output"]: row for row in rows if row.get("sample") == s.id}
    results: list[ThreeWay] = []
    for k, spec in enumerate(contract.outputs):
        eager, aoti = at(s.outputs, k), at(runs.compiled, k)
        if not isinstance(eager, torch.Tensor) or not isinstance(aoti, torch.Tensor):
            continue
        check = tolerance.for_dtype(eager.dtype)
        judged = Results(eager, aoti, at(runs.ort, k), at(runs.refs64, k))
        r = three_way(s.id, spec.name, judged, atol=check.atol, rtol=check.rtol, equal_nan=True)
        results.append(r)
        row = by_output.get(spec.name)
        if row is not None:
            row.update(r.columns())
    return results
