"""Build-time validation: eager and float64 references in this process, the compiled package in a
child (runtime_probe's worker), compared output by output on every golden sample (compare.py).

A child that fails is reported through runtime_probe's one table (``child.failures``); a crash is
then diagnosed by the probe's own escalation ladder (diagnose.py), in the same run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.builder.contract import spec_kwarg_order
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.validate import diagnose
from aoti_guard.builder.validate import onnx_reference as reference_onnx
from aoti_guard.builder.validate.child_run import ChildRun
from aoti_guard.builder.validate.compare import ValidationResult, compare_all
from aoti_guard.builder.validate.golden import Sample, coverage, make_samples
from aoti_guard.builder.validate.references import eager_outputs, fp64_outputs, golden_payload, sample_env
from runtime_probe import layout
from runtime_probe.child import failures
from runtime_probe.child.worker import ChildCrashed, ChildFailure, ChildRaised, Worker
from runtime_probe.findings import Finding, error, warning
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import GoldenSample, IOContract
from runtime_probe.probe.options import ProbeOptions

__all__ = [
    "ChildRun",
    "Validation",
    "ValidationResult",
    "compare_all",
    "compiled_outputs",
    "failure_finding",
    "run_twin",
    "run_validation",
]

PHASE = "validate"
_KERNEL_LINE = re.compile(r"\[\s*(before_launch|after_launch)\s*[:\-]\s*(\S+?)\s*\]")
ESCALATE_S = ProbeOptions.escalate_timeout_s  # the same bound on the ladder as the probe's
_REPORTER = failures.Reporter(
    PHASE, next_step="the build reruns it with the probe's instruments (see the escalate findings)", stderr_chars=4000, stdout_chars=2000
)


def failure_finding(exc: ChildFailure, what: str, stage: str) -> Finding:
    """A child failure as a finding: load.* or run.* by ``stage``, with the captured evidence."""
    return failures.failure_finding(exc, what, stage, _REPORTER)


@dataclass
class Compiled:
    """Outputs per sample id, the failures, and the first crash (its sample, for the ladder)."""

    outputs: dict[str, list[Any]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    crashed: GoldenSample | None = None


def compiled_outputs(run: ChildRun, key: str, only: Sequence[str] | None = None) -> Compiled:
    """Run every sample through the loaded model ``key``."""
    out = Compiled()
    for g in run.index:
        if only is not None and g.id not in only:
            continue
        save = os.path.join(run.out_dir, f"{key}-{g.id}.safetensors")
        try:
            run.worker.request("run", run.timeout, key=key, save_path=save, **run.run_args(g))
        except ChildFailure as exc:
            out.findings.append(failure_finding(exc, f"running the compiled {key} model on golden sample {g.id}", "run"))
            if isinstance(exc, ChildCrashed):
                out.crashed = g
            if not isinstance(exc, ChildRaised):
                break  # the child is gone
            continue
        loaded = _safetensors.load(save)
        out.outputs[g.id] = [loaded.get(o.name) for o in run.contract.outputs]
    return out


def kernel_names(stdout: str) -> list[str]:
    """Kernel names the twin's printer announced (before_launch lines), in order, distinct."""
    seen: list[str] = []
    for m in _KERNEL_LINE.finditer(stdout):
        if m.group(1) == "before_launch" and m.group(2) not in seen:
            seen.append(m.group(2))
    return seen


def run_twin(
    run: ChildRun, twin_path: str, twin_model: str, release: Mapping[str, list[Any]], *, release_nonfinite: bool = False
) -> tuple[dict[str, Any], list[Finding]]:
    """Load the twin and run the example sample: it must load, run, print kernel names and agree
    with the release model. A NaN the twin's asserts catch is an error naming buffer and kernel."""
    try:
        run.worker.request("load", run.timeout, key="twin", path=twin_path, model_name=twin_model, device_index=run.device_index)
    except ChildFailure as exc:
        f = failure_finding(exc, "loading the debug twin", "load")
        hint = "the release model is unaffected; the probe will not be able to escalate to the twin"
        return {}, [warning("build.twin_failed", PHASE, f.message, hint=hint, evidence=f.evidence)]
    out_mark, err_mark = run.worker.stdout.total, run.worker.stderr.total
    twin = compiled_outputs(run, "twin", only=["example"])
    printed, errors = run.worker.stdout.since(out_mark), run.worker.stderr.since(err_mark)
    findings = diagnose.twin_nonfinite(printed, errors, run.device.split(":", 1)[0], release_nonfinite=release_nonfinite)
    if not any(f.code == "build.nonfinite" and f.severity.value in ("error", "warning") for f in findings):  # else: the assert is the why
        hint = "the release model is unaffected"
        findings += [warning("build.twin_failed", PHASE, f.message, hint=hint, evidence=f.evidence) for f in twin.findings]
    info_: dict[str, Any] = {"kernels": kernel_names(printed)}
    if "example" in twin.outputs and "example" in release:
        diffs = []
        for a, b in zip(twin.outputs["example"], release["example"]):
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


def _samples(ep: Any, eager_fn: Any, contract: IOContract, options: BuildOptions, out: Validation) -> list[Sample]:
    """The golden samples with their eager outputs (findings for those dropped go to ``out``)."""
    from torch.utils import _pytree as pytree

    args, kwargs = ep.example_inputs
    ordered = {k: kwargs[k] for k in spec_kwarg_order(ep.call_spec.in_spec, kwargs)}
    samples, notes = make_samples(contract, pytree.tree_leaves((tuple(args), ordered)), seed=options.seed)
    out.findings += [warning("build.sample_dropped", "validate", note) for note in notes]
    samples, eager_findings = eager_outputs(eager_fn, contract, samples, options.device)
    out.findings += eager_findings
    out.coverage, gaps = coverage(contract, samples)
    if gaps:
        out.findings.append(_coverage_finding(gaps, options.allow_partial_coverage))
    return samples


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


def _load_release(run: ChildRun, ep: Any, configs: Mapping[str, Any], release_pt2: str, facts: dict[str, Any]) -> None:
    """Host facts (into ``facts``), then the release model loaded in the child (with the program's
    own weights when the package carries none). Raises ChildFailure."""
    facts.update(run.worker.collect("facts", run.timeout) or {})
    loaded = run.worker.request(
        "load", run.timeout, key="release", path=release_pt2, model_name=layout.RELEASE_MODEL, device_index=run.device_index
    )
    if configs.get("aot_inductor.package_constants_in_so") is False:
        # The package carries no weights; give the child the program's own to validate with.
        wanted = set(loaded.get("constant_fqns") or [])
        weights = {fqn: t for fqn, t in {**ep.state_dict, **ep.constants}.items() if fqn in wanted}
        weights_path = os.path.join(run.out_dir, "weights.safetensors")
        _safetensors.dump({k: v.detach().to("cpu") for k, v in weights.items()}, weights_path)
        run.worker.request("load_weights", run.timeout, key="release", weights_path=weights_path, device=run.device, names=sorted(weights))


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
    out = Validation()
    samples = _samples(ep, eager_fn, contract, options, out)
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
    run = ChildRun(worker, golden_path, index_all, contract, options.device, device_index, work, options.timeout_s)
    _free_cached_gpu_memory(options.device)
    # Started before the compiled runs so the two overlap; killed on the way out whatever happens.
    with reference_onnx.reference(ep, work, golden_path, index_all, contract, options, note) as reference:
        facts: dict[str, Any] = {}
        try:
            _load_release(run, ep, configs, release_pt2, facts)
        except ChildFailure as exc:
            out.findings.append(failure_finding(exc, "loading the compiled release model", "load"))
            if isinstance(exc, ChildCrashed):
                note("the child crashed loading the package: climbing the probe's escalation ladder")
                out.findings += diagnose.crash(release_pt2, run, facts, None, ESCALATE_S, options.output)
            return out
        note("running the compiled model in a child process")
        compiled = compiled_outputs(run, "release")
        out.findings += compiled.findings
        if compiled.crashed is not None:
            note(f"the child crashed on golden sample {compiled.crashed.id}: climbing the probe's escalation ladder")
            out.findings += diagnose.crash(release_pt2, run, facts, compiled.crashed, ESCALATE_S, options.output)
        result = compare_all(
            contract, samples, compiled.outputs, refs64, allow_nonfinite=options.allow_nonfinite, atol=options.atol, rtol=options.rtol
        )
        out.findings += result.findings
        out.tolerances, out.table = result.tolerances, result.table
        if reference is not None:
            out.reference, ref_findings = reference.judge(contract, samples, compiled.outputs, refs64, out.table)
            out.findings += ref_findings
        if twin_pt2 is not None and not compiled.findings:
            note("running the debug twin")
            nonfinite = any(f.code == "build.nonfinite" for f in result.findings)
            out.twin_info, twin_findings = run_twin(run, twin_pt2, layout.TWIN_MODEL, compiled.outputs, release_nonfinite=nonfinite)
            out.findings += twin_findings
        _keep_samples(out, contract, samples, options.golden_max_bytes)
        return out


def _free_cached_gpu_memory(device: str) -> None:
    """Hand back the GPU memory this process cached for the eager and float64 runs.

    The compiled model runs in the validation child, a process of its own: memory that torch's
    caching allocator keeps here after the references' largest sample is memory the child cannot
    have. At full size the float64 copy of a model at its max sample is the largest thing this
    process ever allocates (in the GPU zoo, gpt2's compiled run at batch 32 x 512 tokens ran out of GPU
    memory in the child, nine builds sharing the GPU)."""
    if not device.startswith("cuda"):
        return
    import torch

    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.empty_cache()


def _keep_samples(out: Validation, contract: IOContract, samples: Sequence[Sample], cap: int) -> None:
    """Every sample was validated; store those that fit under the size cap, in order."""
    kept, total = [], 0
    for s in samples:
        size = s.nbytes()
        if total + size > cap:
            out.findings.append(
                warning(
                    "build.sample_dropped",
                    "validate",
                    f"golden sample {s.id} not stored: {size} bytes would pass the {cap} byte cap",
                    hint="raise --golden-max-mb to keep it",
                )
            )
            continue
        kept.append(s)
        total += size
    if kept:
        out.golden_bytes, out.index = golden_payload(contract, kept)
