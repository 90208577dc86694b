"""Compiled vs eager, output by output and sample by sample: the verdict table, the findings for
the outputs that fail, and the tolerances the package will store.

Verdict per output and sample: pass when ``allclose(compiled, eager)`` within the build's tolerance
(tolerance.py: --atol/--rtol, else the dtype's default); else pass
when the compiled result is about as close to a float64 reference as eager is (RMSE within 3x of
eager's, plus atol/10: the rule torch._dynamo uses for its own accuracy checks); else fail.
The float64 rule does not apply on the threshold sample (sample_rule.py says why).
Non-finite values in a compiled output fail unless allowed; where NaN/Inf are the expected answer
(a half-precision edge sample, --allow-nonfinite) is runtime_probe/golden/sample_rule.py's rule,
which the probe applies too. An edge sample's differences set a tolerance of its own
(``ValidationResult.sample_tolerances``), never the output's shared one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from aoti_guard.builder.golden import Sample, ToleranceStats, stored_floor
from aoti_guard.builder.validate.references import sample_env
from aoti_guard.builder.validate.tolerance import ToleranceRule
from aoti_guard.builder.validate.verdict import close_to_fp64
from runtime_probe.golden.sample_rule import sample_rule
from runtime_probe.package.manifest import IOContract, Tolerance
from runtime_probe.reporting.findings import Finding, error, warning

__all__ = ["CHECK_KEYS", "Comparison", "ValidationResult", "manifest_table"]

PHASE = "validate"


@dataclass
class ValidationResult:
    findings: list[Finding] = field(default_factory=list)
    tolerances: list[Tolerance] = field(default_factory=list)
    table: list[dict[str, Any]] = field(default_factory=list)
    margins: list[dict[str, Any]] = field(default_factory=list)  # per output: the worst error against its tolerance
    # sample id -> its own tolerance per output (sample_rule's own_tolerance: the edge samples)
    sample_tolerances: dict[str, list[Tolerance]] = field(default_factory=dict)


# A stored atol this many times its dtype's floor is reported with the sample and rule behind it.
WIDE_FACTOR = 100.0


# A table row's copy of its output's build-check tolerance: the manifest records it once per
# output (Tolerance.build_check) and its table rows go without (manifest_table).
CHECK_KEYS = ("atol", "rtol")


@dataclass(frozen=True)
class _Rule:
    """How outputs are judged: the build's tolerance and whether NaN/Inf is allowed."""

    allow_nonfinite: bool
    tolerance: ToleranceRule
    device: str | None = None  # where the arithmetic runs
    # The float64 rule (as close to float64 as eager is) is only as good as eager's own
    # repeatability: with a model that gives two answers to one input it would turn eager's noise
    # into a floor, so validation turns it off when eager disagrees with itself (run.py).
    fp64_rule: bool = True


class Comparison:
    """Compiled vs eager, one sample at a time: each sample's rows and findings as it comes, the
    tolerances (from every sample's differences) at the end. Nothing of a sample is kept once it
    has been added, which is what lets validation drop its tensors (run.py)."""

    def __init__(
        self,
        contract: IOContract,
        *,
        allow_nonfinite: bool,
        tolerance: ToleranceRule,
        device: str | None = None,
        fp64_rule: bool = True,
    ) -> None:
        """``tolerance``: the build's (BuildState.tolerance). ``device``: where the comparisons'
        arithmetic runs (a CUDA build's GPU; default the CPU). ``fp64_rule``: accept a compiled
        output as close to float64 as eager is (off when eager is not repeatable)."""
        self.contract = contract
        self.rule = _Rule(allow_nonfinite, tolerance, device, fp64_rule)
        self.result = ValidationResult()
        self._gathered = self._new_stats()
        self._own: dict[str, dict[str, ToleranceStats]] = {}  # sample id -> its own stats (sample_rule's own_tolerance)
        self._seen: set[str] = set()  # outputs with at least one compared pair
        self._widest: dict[str, dict[str, Any]] = {}  # output -> the table row of the sample that set its stored atol

    def add(self, s: Sample, compiled: Sequence[Any], refs64: Sequence[Any] | None) -> list[dict[str, Any]]:
        """Judge one sample's compiled outputs (``refs64``: its float64 reference, or None); returns
        the table rows it added."""
        import torch

        rows_before = len(self.result.table)
        for k, spec in enumerate(self.contract.outputs):
            c = compiled[k] if k < len(compiled) else None
            e = s.outputs[k] if k < len(s.outputs) else None
            if not isinstance(e, torch.Tensor):
                continue
            if not isinstance(c, torch.Tensor):
                self.result.findings.append(
                    error(
                        "build.validation_failed",
                        PHASE,
                        f"output {spec.name!r} is missing from the compiled result on sample {s.id}",
                        expected="a tensor",
                        found=repr(c)[:80],
                    )
                )
                continue
            r = refs64[k] if refs64 is not None and k < len(refs64) else None
            c, e, r = _staged(self.rule.device, c, e, r)
            self._judge_one(s, spec.name, c, e, r, has_refs=refs64 is not None)
            if spec.name not in self._gathered:
                continue
            self._seen.add(spec.name)
            if sample_rule(s.id, allow_nonfinite=self.rule.allow_nonfinite).own_tolerance:
                self._own.setdefault(s.id, self._new_stats())[spec.name].add(c, e)
                continue
            stats = self._gathered[spec.name]
            before = stats.excess
            stats.add(c, e)
            if stats.excess > before or spec.name not in self._widest:
                self._widest[spec.name] = self.result.table[-1]
        return self.result.table[rows_before:]

    def _new_stats(self) -> dict[str, ToleranceStats]:
        """One empty ToleranceStats per tensor output."""
        return {o.name: ToleranceStats(o.name, o.tensor.dtype, self.rule.device) for o in self.contract.outputs if o.tensor is not None}

    def finish(self) -> ValidationResult:
        """The result, with a tolerance for every output that was compared at least once: the
        stored one, its origin, and the build check it was validated by."""
        self.result.tolerances = [self._recorded(g) for name, g in self._gathered.items() if name in self._seen]
        self.result.sample_tolerances = {
            sid: [self._recorded(g, sid) for name, g in own.items() if name in self._seen] for sid, own in self._own.items()
        }
        self.result.margins = margins(self.result.table, self.result.tolerances, self.result.sample_tolerances)
        for tol in self.result.tolerances:
            dtype = self._gathered[tol.output].dtype
            floors = stored_floor(dtype)
            widest = self._widest.get(tol.output, {})
            # a failed row rejects the package: its error is reported as the failure, not as a tolerance
            if floors is not None and tol.atol > WIDE_FACTOR * floors[0] and widest.get("verdict") == "pass":
                self.result.findings.append(_wide(tol, dtype, floors[0], widest))
        return self.result

    def _judge_one(self, s: Sample, name: str, c: Any, e: Any, r: Any, *, has_refs: bool) -> None:
        """One output of one sample: a row of the table, and a finding when it fails."""
        import torch

        from runtime_probe.runtime import numerics as _numerics

        result, rule = self.result, self.rule

        check = rule.tolerance.for_dtype(e.dtype)
        b_atol, b_rtol = check.atol, check.rtol
        # A half-precision edge sample (golden.py) is made to overflow: NaN/Inf where eager has them is
        # its expected answer, and one where eager has none (or a finite value where eager overflows)
        # is a mismatch like any other, which the stage bisection then explains. The probe judges by
        # the same rule (sample_rule.py).
        judged = sample_rule(s.id, allow_nonfinite=rule.allow_nonfinite)
        matched = judged.matched_nonfinite
        st = _numerics.stats(c, e, atol=b_atol, rtol=b_rtol, equal_nan=matched, device=rule.device)
        row: dict[str, Any] = {
            "sample": s.id,
            "output": name,
            **{k2: st.get(k2) for k2 in ("max_abs", "max_rel", "atol", "rtol", "passed", "nonfinite", "tolerance_used")},
        }
        if isinstance(r, torch.Tensor) and r.is_floating_point() and r.shape == c.shape:
            # the float64 reference's distance, recorded whatever the verdict (docs/zoo.md's column)
            row.update(max_abs_vs_fp64=_max_abs_diff(c, r, rule.device), eager_max_abs_vs_fp64=_max_abs_diff(e, r, rule.device))
        verdict = bool(st.get("passed"))
        if st.get("nonfinite") and not matched:
            result.findings.append(_nonfinite(s, name, st["nonfinite"], _numerics.nonfinite_count(e)))
            verdict = True  # reported once, as non-finite
        # (not on the threshold sample, where float64 disagrees with eager by construction: sample_rule.py)
        elif (
            not verdict
            and "reason" not in st
            and rule.fp64_rule
            and judged.fp64_accepts
            and isinstance(r, torch.Tensor)
            and r.is_floating_point()
        ):
            verdict, e_err, c_err = close_to_fp64(c, e, r, b_atol, rule.device)
            row.update(
                rmse_eager_vs_fp64=_numerics.json_number(e_err),
                rmse_compiled_vs_fp64=_numerics.json_number(c_err),
                accepted_by="fp64" if verdict else None,
            )
        row["verdict"] = "pass" if verdict else "fail"
        result.table.append(row)
        if not verdict:
            result.findings.append(_failed(s, name, st, b_atol, b_rtol, has_refs=has_refs and judged.fp64_accepts))

    def _recorded(self, gathered: ToleranceStats, own: str | None = None) -> Tolerance:
        """``gathered``'s stored tolerance: the output's shared one, or sample ``own``'s."""
        sample = own if own is not None else self._widest.get(gathered.output, {}).get("sample")
        tol = gathered.tolerance(sample if isinstance(sample, str) else None)
        return replace(tol, build_check=self.rule.tolerance.for_dtype(gathered.dtype))


def _staged(device: str | None, *tensors: Any) -> list[Any]:
    """The tensors copied to ``device`` once, when it is a GPU with room for them twice over:
    each comparison then reads them there instead of copying every chunk again (six passes over
    an output and its references: gpt2's logits came to 46 GB of copies per sample). Otherwise as
    they are; the chunks go over one at a time. The copies are freed before the child runs the
    next sample (run.py empties the cache)."""
    import torch

    if device is None or not device.startswith("cuda"):
        return list(tensors)
    need = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    if 2 * need > free:
        return list(tensors)
    return [t.to(device) if isinstance(t, torch.Tensor) else t for t in tensors]


def _nonfinite(s: Sample, name: str, count: int, eager_bad: int) -> Finding:
    return error(
        "build.nonfinite",
        PHASE,
        f"output {name!r} holds {count} NaN/Inf value(s) on sample {s.id} ({sample_env(s)})"
        + (f"; eager has {eager_bad} too" if eager_bad else "; eager has none"),
        expected="finite values",
        found=f"{count} non-finite",
        hint="fix the model's numerics, or pass --allow-nonfinite if NaN/Inf is intended",
        evidence={"sample": s.id, "output": name},
    )


def _failed(s: Sample, name: str, st: dict[str, Any], b_atol: float, b_rtol: float, *, has_refs: bool) -> Finding:
    if st.get("reason") in ("shape", "dtype"):
        return error(
            "build.validation_failed",
            PHASE,
            f"output {name!r} has the wrong {st['reason']} on sample {s.id}",
            expected=str(st.get("expected")),
            found=str(st.get("found")),
            evidence={"sample": s.id, "output": name},
        )
    return error(
        "build.validation_failed",
        PHASE,
        f"output {name!r} differs from eager on sample {s.id} ({sample_env(s)}): max abs error {_g(st.get('max_abs'))}, max rel error {_g(st.get('max_rel'))}",
        expected=f"within atol {b_atol:g} + rtol {b_rtol:g}" + (" or as close to float64 as eager" if has_refs else ""),
        found=f"max abs {_g(st.get('max_abs'))}, max rel {_g(st.get('max_rel'))}",
        hint="the stage bisection (build.first_divergence) names the first stage that departs from eager; loosen with "
        "--atol/--rtol only if the error is acceptable",
        evidence={
            "sample": s.id,
            "output": name,
            "max_abs": st.get("max_abs"),
            "max_rel": st.get("max_rel"),
            "atol": b_atol,
            "rtol": b_rtol,
        },
    )


def _g(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _max_abs_diff(a: Any, b: Any, device: str | None) -> float | None:
    """max |a - b| in float64 over the finite differences; None for an empty or complex tensor."""
    from runtime_probe.runtime import numerics as _numerics

    if a.numel() == 0 or a.is_complex():
        return None
    return _numerics.max_abs_diff(a, b, device=device)


def manifest_table(table: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The validation table as the manifest keeps it: each row without its output's build-check
    atol/rtol, which the output's tolerance records once (``Tolerance.build_check``, since 1.7).
    The build report's table keeps them."""
    return [{k: v for k, v in row.items() if k not in CHECK_KEYS} for row in table]


def margins(
    table: Sequence[dict[str, Any]], tolerances: Sequence[Tolerance], own: Mapping[str, Sequence[Tolerance]] | None = None
) -> list[dict[str, Any]]:
    """Per output, its worst sample: the error, the share of the build tolerance it used, and the
    tolerance the package stores for that sample (``own``: sample id -> a sample's own tolerances,
    else the output's ``tolerances``; the text summary prints these, so no one has to open the JSON)."""
    stored = {t.output: t for t in tolerances}
    out: dict[str, dict[str, Any]] = {}
    for row in table:
        used = row.get("tolerance_used")
        name = row.get("output")
        if not isinstance(name, str):
            continue
        key = float("inf") if isinstance(used, str) else float(used or 0.0)
        best = out.get(name)
        if best is None or key > best["_key"]:
            out[name] = {
                "_key": key,
                "output": name,
                "sample": row.get("sample"),
                "max_abs": row.get("max_abs"),
                "atol": row.get("atol"),
                "rtol": row.get("rtol"),
                "tolerance_used": used,
                "verdict": row.get("verdict"),
                "accepted_by": row.get("accepted_by"),
            }
    result = []
    for name, m in out.items():
        m.pop("_key")
        tol = next((t for t in (own or {}).get(str(m["sample"]), ()) if t.output == name), stored.get(name))
        if tol is not None:
            m.update(stored_atol=tol.atol, stored_rtol=tol.rtol)
        result.append(m)
    return result


def _wide(tol: Tolerance, dtype: str, floor: float, row: dict[str, Any]) -> Finding:
    """A stored atol far above the dtype's floor, with the sample and the rule that let it in."""
    sample = row.get("sample", "?")
    if row.get("accepted_by") == "fp64":
        why = (
            f"on sample {sample} compiled differed from eager beyond the build tolerance and was accepted because it is as close "
            f"to float64 as eager is (RMSE vs float64: compiled {_g(row.get('rmse_compiled_vs_fp64'))}, eager "
            f"{_g(row.get('rmse_eager_vs_fp64'))})"
        )
    else:
        why = f"on sample {sample} compiled differed from eager by up to {_g(row.get('max_abs'))} within the build tolerance"
    return warning(
        "build.tolerance_wide",
        PHASE,
        f"output {tol.output!r}: the stored atol {tol.atol:.3g} is {tol.atol / floor:.0f}x the {dtype} floor {floor:g}: {why}",
        expected=f"atol near {floor:g}",
        found=f"atol {tol.atol:.3g} (max abs error {tol.measured_abs:.3g})",
        hint="every probe will accept errors this large on this output; if that is more than the model's numerics explain, "
        "look at the sample (a large reduction, a low-precision path) before shipping",
        evidence={"output": tol.output, "sample": sample, "atol": tol.atol, "floor": floor, "row": dict(row)},
    )
