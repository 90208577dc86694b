"""Build-time validation: eager and float64 references in this process, the compiled package in a
child (runtime_probe's worker), compared output by output on every golden sample.

Verdict per output and sample: pass when ``allclose(compiled, eager, BUILD_TOLERANCE)``; else pass
when the compiled result is about as close to a float64 reference as eager is (RMSE within 3x of
eager's, plus atol/10: the rule torch._dynamo uses for its own accuracy checks); else fail.
Non-finite values in a compiled output fail unless allowed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.builder.contract import spec_kwarg_order
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.validate import onnx_reference as reference_onnx
from aoti_guard.builder.validate.golden import BUILD_TOLERANCE, Sample, coverage, derive_tolerance, make_samples
from aoti_guard.builder.validate.references import eager_outputs, fp64_outputs, golden_payload, sample_env
from aoti_guard.builder.validate.verdict import close_to_fp64
from runtime_probe import layout
from runtime_probe.child.worker import ChildCrashed, ChildFailure, ChildRaised, ChildTimeout, Worker
from runtime_probe.findings import Finding, error, warning
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import GoldenSample, IOContract, Tolerance

__all__ = [
    "Validation",
    "ValidationResult",
    "compare_all",
    "compiled_outputs",
    "run_twin",
    "run_validation",
]

PHASE = "validate"
_KERNEL_LINE = re.compile(r"\[\s*(before_launch|after_launch)\s*[:\-]\s*(\S+?)\s*\]")


@dataclass
class ValidationResult:
    findings: list[Finding] = field(default_factory=list)
    tolerances: list[Tolerance] = field(default_factory=list)
    table: list[dict[str, Any]] = field(default_factory=list)


def _input_specs(contract: IOContract) -> list[dict[str, Any]]:
    out = []
    for spec in contract.inputs:
        d: dict[str, Any] = {"name": spec.name, "kind": spec.kind, "value": spec.value}
        if spec.tensor is not None:
            d["stride"] = list(spec.tensor.stride)
        out.append(d)
    return out


def compiled_outputs(
    worker: Worker,
    key: str,
    golden_path: str,
    index: list[GoldenSample],
    contract: IOContract,
    device: str,
    out_dir: str,
    timeout: float,
    only: Sequence[str] | None = None,
) -> tuple[dict[str, list[Any]], list[Finding]]:
    """Run every sample through the loaded model ``key``; returns outputs per sample id and findings."""
    outputs: dict[str, list[Any]] = {}
    findings: list[Finding] = []
    for g in index:
        if only is not None and g.id not in only:
            continue
        save = os.path.join(out_dir, f"{key}-{g.id}.safetensors")
        try:
            worker.request(
                "run",
                timeout,
                key=key,
                golden_path=golden_path,
                sample=_sample_dict(g),
                inputs=_input_specs(contract),
                in_spec=contract.in_spec,
                outputs=[o.name for o in contract.outputs if o.tensor is not None],  # the runner returns tensors only
                device=device,
                save_path=save,
            )
        except ChildFailure as exc:
            findings.append(failure_finding(exc, f"running the compiled {key} model on golden sample {g.id}", "run"))
            if not isinstance(exc, ChildRaised):
                break  # the child is gone
            continue
        loaded = _safetensors.load(save)
        outputs[g.id] = [loaded.get(o.name) for o in contract.outputs]
    return outputs, findings


def _sample_dict(g: GoldenSample) -> dict[str, Any]:
    return {"id": g.id, "inputs": dict(g.inputs), "outputs": dict(g.outputs), "symbols": dict(g.symbols)}


def failure_finding(exc: ChildFailure, what: str, stage: str) -> Finding:
    """A child failure as a finding: load.* or run.* by ``stage``, with the captured evidence."""
    evidence: dict[str, Any] = {"stderr_tail": exc.stderr[-4000:], "stdout_tail": exc.stdout[-2000:], **exc.evidence}
    evidence.pop("traceback", None)
    if isinstance(exc, ChildCrashed):
        sig = exc.signal or f"exit code {exc.returncode}"
        native = exc.evidence.get("native") or []
        return error(
            f"{stage}.crash",
            PHASE,
            f"{what}: the child process died ({sig})",
            found=sig,
            hint="the native code crashed; run `aoti-guard probe` on the package for a diagnosis"
            + (f"; native output: {native[-1]}" if native else ""),
            evidence=evidence,
        )
    if isinstance(exc, ChildTimeout):
        return error(
            f"{stage}.timeout",
            PHASE,
            f"{what}: no answer within {exc.seconds:.0f}s; the child was killed",
            hint="raise --timeout, or check for a hang",
            evidence=evidence,
        )
    assert isinstance(exc, ChildRaised)
    native = [line for line in exc.stderr.splitlines() if line.startswith("Error:")]
    detail = native[-1] if native else f"{exc.error_type}: {exc.message.splitlines()[0] if exc.message else ''}"
    return error(
        f"{stage}.error", PHASE, f"{what} raised: {detail[:400]}", hint="see evidence.stderr_tail for the native error", evidence=evidence
    )


def compare_all(
    contract: IOContract,
    samples: list[Sample],
    compiled: dict[str, list[Any]],
    refs64: dict[str, list[Any]] | None,
    *,
    allow_nonfinite: bool,
    atol: float | None,
    rtol: float | None,
) -> ValidationResult:
    import torch

    from runtime_probe import numerics as _numerics

    result = ValidationResult()
    pairs: dict[str, list[tuple[Any, Any]]] = {o.name: [] for o in contract.outputs}
    for s in samples:
        outs = compiled.get(s.id)
        if outs is None:
            continue
        for k, spec in enumerate(contract.outputs):
            c = outs[k] if k < len(outs) else None
            e = s.outputs[k] if k < len(s.outputs) else None
            if not isinstance(e, torch.Tensor):
                continue
            if not isinstance(c, torch.Tensor):
                result.findings.append(
                    error(
                        "build.validation_failed",
                        PHASE,
                        f"output {spec.name!r} is missing from the compiled result on sample {s.id}",
                        expected="a tensor",
                        found=repr(c)[:80],
                    )
                )
                continue
            dtype = str(e.dtype).replace("torch.", "")
            b_atol, b_rtol = BUILD_TOLERANCE.get(dtype, (0.0, 0.0))
            b_atol = atol if atol is not None else b_atol
            b_rtol = rtol if rtol is not None else b_rtol
            st = _numerics.stats(c, e, atol=b_atol, rtol=b_rtol, equal_nan=allow_nonfinite)
            row: dict[str, Any] = {
                "sample": s.id,
                "output": spec.name,
                **{k2: st.get(k2) for k2 in ("max_abs", "max_rel", "atol", "rtol", "passed", "nonfinite")},
            }
            verdict = bool(st.get("passed"))
            if st.get("nonfinite") and not allow_nonfinite:
                eager_bad = _numerics.nonfinite_count(e)
                result.findings.append(
                    error(
                        "build.nonfinite",
                        PHASE,
                        f"output {spec.name!r} holds {st['nonfinite']} NaN/Inf value(s) on sample {s.id} ({sample_env(s)})"
                        + (f"; eager has {eager_bad} too" if eager_bad else "; eager has none"),
                        expected="finite values",
                        found=f"{st['nonfinite']} non-finite",
                        hint="fix the model's numerics, or pass --allow-nonfinite if NaN/Inf is intended",
                        evidence={"sample": s.id, "output": spec.name},
                    )
                )
                verdict = True  # reported once, as non-finite
            elif not verdict and "reason" not in st and refs64 is not None and s.id in refs64:
                r = refs64[s.id][k]
                if isinstance(r, torch.Tensor) and r.is_floating_point():
                    verdict, e_err, c_err = close_to_fp64(c, e, r, b_atol)
                    row.update(rmse_eager_vs_fp64=e_err, rmse_compiled_vs_fp64=c_err)
            row["verdict"] = "pass" if verdict else "fail"
            result.table.append(row)
            if not verdict:
                if st.get("reason") in ("shape", "dtype"):
                    msg = f"output {spec.name!r} has the wrong {st['reason']} on sample {s.id}"
                    result.findings.append(
                        error(
                            "build.validation_failed",
                            PHASE,
                            msg,
                            expected=str(st.get("expected")),
                            found=str(st.get("found")),
                            evidence={"sample": s.id, "output": spec.name},
                        )
                    )
                else:
                    result.findings.append(
                        error(
                            "build.validation_failed",
                            PHASE,
                            f"output {spec.name!r} differs from eager on sample {s.id} ({sample_env(s)}): max abs error {_g(st.get('max_abs'))}, max rel error {_g(st.get('max_rel'))}",
                            expected=f"within atol {b_atol:g} + rtol {b_rtol:g}" + (" or as close to float64 as eager" if refs64 else ""),
                            found=f"max abs {_g(st.get('max_abs'))}, max rel {_g(st.get('max_rel'))}",
                            hint="likely a compiler problem: compare with `--reference onnxruntime`, or loosen with --atol/--rtol if the error is acceptable",
                            evidence={
                                "sample": s.id,
                                "output": spec.name,
                                "max_abs": st.get("max_abs"),
                                "max_rel": st.get("max_rel"),
                                "atol": b_atol,
                                "rtol": b_rtol,
                            },
                        )
                    )
            pairs[spec.name].append((c, e))
    for spec in contract.outputs:
        if spec.tensor is not None and pairs[spec.name]:
            result.tolerances.append(derive_tolerance(spec.name, spec.tensor.dtype, pairs[spec.name]))
    return result


def _g(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def kernel_names(stdout: str) -> list[str]:
    """Kernel names the twin's printer announced (before_launch lines), in order, distinct."""
    seen: list[str] = []
    for m in _KERNEL_LINE.finditer(stdout):
        if m.group(1) == "before_launch" and m.group(2) not in seen:
            seen.append(m.group(2))
    return seen


def run_twin(
    worker: Worker,
    twin_path: str,
    twin_model: str,
    golden_path: str,
    index: list[GoldenSample],
    contract: IOContract,
    device: str,
    device_index: int | None,
    out_dir: str,
    timeout: float,
    release: dict[str, list[Any]],
) -> tuple[dict[str, Any], list[Finding]]:
    """Load the twin and run the example sample: it must load, run, print kernel names and agree
    with the release model."""
    findings: list[Finding] = []
    try:
        worker.request("load", timeout, key="twin", path=twin_path, model_name=twin_model, device_index=device_index)
    except ChildFailure as exc:
        f = failure_finding(exc, "loading the debug twin", "load")
        return {}, [
            warning(
                "build.twin_failed",
                PHASE,
                f.message,
                hint="the release model is unaffected; the probe will not be able to escalate to the twin",
                evidence=f.evidence,
            )
        ]
    mark = worker.stdout.total
    outs, run_findings = compiled_outputs(worker, "twin", golden_path, index, contract, device, out_dir, timeout, only=["example"])
    printed = worker.stdout.since(mark)
    for f in run_findings:
        findings.append(warning("build.twin_failed", PHASE, f.message, hint="the release model is unaffected", evidence=f.evidence))
    info_: dict[str, Any] = {"kernels": kernel_names(printed)}
    if "example" in outs and "example" in release:
        diffs = []
        for a, b in zip(outs["example"], release["example"]):
            if a is not None and b is not None and a.shape == b.shape and a.is_floating_point():
                diffs.append(float((a.double() - b.double()).abs().nan_to_num(0.0).max().item()) if a.numel() else 0.0)
        info_["max_abs_vs_release"] = max(diffs, default=0.0)
    if not info_["kernels"] and not findings:
        findings.append(
            warning(
                "build.twin_failed",
                PHASE,
                "the debug twin ran but printed no kernel names",
                hint="this torch version may not support the intermediate-value printer for this device",
            )
        )
    return info_, findings


@dataclass
class Validation:
    """What validation found and what the package will store."""

    findings: list[Finding] = field(default_factory=list)
    tolerances: list[Any] = field(default_factory=list)
    table: list[dict[str, Any]] = field(default_factory=list)
    golden_bytes: bytes | None = None
    index: list[Any] = field(default_factory=list)
    twin_info: dict[str, Any] | None = None
    reference: dict[str, Any] | None = None  # the ONNX Runtime reference's detail (--reference onnxruntime)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)  # symbol -> min, max, values tested


def _coverage_finding(gaps: Sequence[str], allowed: bool) -> Finding:
    """A boundary the golden samples did not reach: an error unless partial coverage was accepted."""
    make = warning if allowed else error
    return make(
        "build.coverage_incomplete",
        "validate",
        f"the golden samples do not cover every dynamic dimension's range: {'; '.join(gaps)}",
        expected="a sample at each free symbol's minimum and maximum",
        found="; ".join(gaps),
        hint="see the build.sample_dropped notes for why a sample could not be made; "
        + ("accepted with --allow-partial-coverage" if allowed else "fix the range, or pass --allow-partial-coverage to accept it"),
    )


def run_validation(
    ep: Any,
    eager_fn: Any,
    contract: IOContract,
    configs: Mapping[str, Any],
    options: BuildOptions,
    note: Callable[[str], None],
    work: str,
    worker: Worker,
    release_pt2: str,
    twin_pt2: str | None,
) -> Validation:
    from torch.utils import _pytree as pytree

    out = Validation()
    args, kwargs = ep.example_inputs
    ordered = {k: kwargs[k] for k in spec_kwarg_order(ep.call_spec.in_spec, kwargs)}
    samples, notes = make_samples(contract, pytree.tree_leaves((tuple(args), ordered)), seed=options.seed)
    out.findings += [warning("build.sample_dropped", "validate", note) for note in notes]
    samples, eager_findings = eager_outputs(eager_fn, contract, samples, options.device)
    out.findings += eager_findings
    out.coverage, gaps = coverage(contract, samples)
    if gaps:
        out.findings.append(_coverage_finding(gaps, options.allow_partial_coverage))
    if not samples:
        return out
    note(f"{len(samples)} golden sample(s): {', '.join(f'{s.id} ({sample_env(s)})' for s in samples)}")
    refs64 = None
    if options.fp64_reference:
        refs64, skipped = fp64_outputs(eager_fn, contract, samples, options.device)
        if skipped is not None:
            out.findings.append(skipped)
    golden_all, index_all = golden_payload(contract, samples)
    golden_path = os.path.join(work, "golden.safetensors")
    with open(golden_path, "wb") as fh:
        fh.write(golden_all)
    device_index = int(options.device.split(":", 1)[1]) if ":" in options.device else None
    # Started before the compiled runs so the two overlap; killed on the way out whatever happens.
    with reference_onnx.reference(ep, work, golden_path, index_all, contract, options, note) as reference:
        try:
            worker.collect("facts", options.timeout_s)
            loaded = worker.request(
                "load", options.timeout_s, key="release", path=release_pt2, model_name=layout.RELEASE_MODEL, device_index=device_index
            )
            if configs.get("aot_inductor.package_constants_in_so") is False:
                # The package carries no weights; give the child the program's own to validate with.
                weights = {fqn: t for fqn, t in {**ep.state_dict, **ep.constants}.items() if fqn in set(loaded.get("constant_fqns") or [])}
                weights_path = os.path.join(work, "weights.safetensors")
                _safetensors.dump({k: v.detach().to("cpu") for k, v in weights.items()}, weights_path)
                worker.request(
                    "load_weights",
                    options.timeout_s,
                    key="release",
                    weights_path=weights_path,
                    device=options.device,
                    names=sorted(weights),
                )
        except ChildFailure as exc:
            out.findings.append(failure_finding(exc, "loading the compiled release model", "load"))
            return out
        note("running the compiled model in a child process")
        compiled, run_findings = compiled_outputs(
            worker, "release", golden_path, index_all, contract, options.device, work, options.timeout_s
        )
        out.findings += run_findings
        result = compare_all(
            contract, samples, compiled, refs64, allow_nonfinite=options.allow_nonfinite, atol=options.atol, rtol=options.rtol
        )
        out.findings += result.findings
        out.tolerances, out.table = result.tolerances, result.table
        if reference is not None:
            out.reference, ref_findings = reference.judge(contract, samples, compiled, refs64, out.table)
            out.findings += ref_findings
        if twin_pt2 is not None and not run_findings:
            note("running the debug twin")
            out.twin_info, twin_findings = run_twin(
                worker,
                twin_pt2,
                layout.TWIN_MODEL,
                golden_path,
                index_all,
                contract,
                options.device,
                device_index,
                work,
                options.timeout_s,
                compiled,
            )
            out.findings += twin_findings
        # Every sample was validated; store those that fit under the size cap, in order.
        kept, total = [], 0
        for s in samples:
            size = s.nbytes()
            if total + size > options.golden_max_bytes:
                out.findings.append(
                    warning(
                        "build.sample_dropped",
                        "validate",
                        f"golden sample {s.id} not stored: {size} bytes would pass the {options.golden_max_bytes} byte cap",
                        hint="raise --golden-max-mb to keep it",
                    )
                )
                continue
            kept.append(s)
            total += size
        if kept:
            out.golden_bytes, out.index = golden_payload(contract, kept)
        return out
