"""Build-time validation: eager and float64 references in this process, the compiled package in a
child (runtime_probe's worker), compared output by output on every golden sample (compare.py).

One sample at a time: its eager outputs, its float64 reference, its compiled outputs, the
comparison, then its tensors are dropped (only the samples the package stores keep their eager
outputs, under --golden-max-mb). Holding every sample's three sets of outputs at once is what a
language model's logits at full size cannot afford: gpt2 at 32 x 512 tokens is 3.3 GB in float32
for one output of one sample (docs/zoo.md). The child reads the samples' inputs from a file of its
own, which holds no outputs.

A child that fails is reported through runtime_probe's one table (``child.failures``); a crash is
then diagnosed by the probe's own escalation ladder (diagnose.py), in the same run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aoti_guard.builder import resources
from aoti_guard.builder.compile.constant_names import ConstantNames, pair_renamed, program_tensors, tensor_digest
from aoti_guard.builder.export.contract import spec_kwarg_order
from aoti_guard.builder.golden import Sample, coverage, make_samples, stored_floor
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.thresholds import comparison_constants
from aoti_guard.builder.validate import diagnose, precision
from aoti_guard.builder.validate import onnx_reference as reference_onnx
from aoti_guard.builder.validate import stages as stages_mod
from aoti_guard.builder.validate.child_run import ChildRun
from aoti_guard.builder.validate.compare import Comparison, ValidationResult
from aoti_guard.builder.validate.golden_store import GoldenStore
from aoti_guard.builder.validate.references import Float64Reference, eager_output, golden_payload, sample_env
from aoti_guard.builder.validate.subject import Subject
from runtime_probe.child import failures
from runtime_probe.child.worker import ChildCrashed, ChildFailure, ChildRaised, Worker
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.golden import compact as _compact
from runtime_probe.package.manifest import CompactSample, GoldenSample, IOContract, UserCode
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.reporting.findings import Finding, error, warning
from runtime_probe.runtime import layout

__all__ = [
    "ChildRun",
    "SampleSteps",
    "Validation",
    "ValidationJob",
    "ValidationResult",
    "compiled_sample",
    "example_leaves",
    "failure_finding",
    "free_cached_gpu_memory",
    "ran_sample",
    "run_validation",
    "validate_each",
]

PHASE = "validate"
ESCALATE_S = ProbeOptions.escalate_timeout_s  # the same bound on the ladder as the probe's
_REPORTER = failures.Reporter(
    PHASE, next_step="the build reruns it with the probe's instruments (see the escalate findings)", stderr_chars=4000, stdout_chars=2000
)


def failure_finding(exc: ChildFailure, what: str, stage: str) -> Finding:
    """A child failure as a finding: load.* or run.* by ``stage``, with the captured evidence; a
    child that ran out of a resource (memory, disk, the file-size limit, SIGKILL) is
    ``build.resource_exhausted`` (builder/resources.py), the machine's doing, not the package's."""
    finding = failures.failure_finding(exc, what, stage, _REPORTER)
    exhausted = resources.from_child(exc)
    if exhausted is None:
        return finding
    return resources.finding(exhausted, PHASE, what, evidence={"child_finding": finding.code, **finding.evidence})


def compiled_sample(run: ChildRun, key: str, g: GoldenSample) -> list[Any] | ChildFailure:
    """One sample through the loaded model ``key``: its outputs in contract order (read back and
    the file removed), or the child's failure. The file is private to this exchange: written
    without fsync and read through the memory map (``borrow``); gpt2's largest sample at full
    size has 3.3 GB of logits (run 16)."""
    save = os.path.join(run.out_dir, f"{key}-{g.id}.safetensors")
    try:
        run.worker.request("run", run.timeout, key=key, save_path=save, save_durable=False, **run.run_args(g))
        loaded = _safetensors.load(save, borrow=True)
    except ChildFailure as exc:
        return exc
    finally:
        with contextlib.suppress(OSError):
            os.remove(save)
    return [loaded.get(o.name) for o in run.contract.outputs]


def ran_sample(run: ChildRun, key: str, g: GoldenSample) -> ChildFailure | None:
    """One sample through the loaded model ``key``, its outputs left in the child: for a run whose
    value is what the model printed (the twin's baseline). gpt2's largest sample at full size
    has 3.3 GB of logits; writing them out and reading them back took most of the twin's 10 s on
    it (run 16, docs/gpu-validation.md)."""
    try:
        run.worker.request("run", run.timeout, key=key, **run.run_args(g))
    except ChildFailure as exc:
        return exc
    return None


@dataclass
class Validation:
    """What validation found and what the package will store."""

    findings: list[Finding] = field(default_factory=list)
    tolerances: list[Any] = field(default_factory=list)
    sample_tolerances: dict[str, list[Any]] = field(default_factory=dict)  # an edge sample's own (compare.py)
    table: list[dict[str, Any]] = field(default_factory=list)
    golden_bytes: bytes | None = None
    index: list[Any] = field(default_factory=list)
    compact: list[CompactSample] = field(default_factory=list)  # samples kept in compact form
    storage: list[dict[str, Any]] = field(default_factory=list)  # per sample: stored full, compact, or dropped (and why)
    twin_info: dict[str, Any] | None = None
    reference: dict[str, Any] | None = None  # the ONNX Runtime reference's detail (--reference onnxruntime)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)  # symbol -> min, max, values tested
    timings: list[dict[str, Any]] = field(default_factory=list)  # per sample: seconds of eager, fp64, compiled, compare
    margins: list[dict[str, Any]] = field(default_factory=list)  # per output: the worst error against its tolerance
    eager_repeat: dict[str, Any] | None = None  # eager's example outputs from export vs from validation
    stages: list[dict[str, Any]] | None = None  # the stage bisection's rows, when compiled differed from eager
    constant_names: ConstantNames = field(default_factory=ConstantNames)  # program constants the compiler renamed
    # For the debug_twin step, which runs after validation (so that validation overlaps the twin's
    # compile): the child with the release model loaded, when no run failed in it; the release
    # model's outputs on the example; whether validation saw a NaN/Inf in them.
    child_run: ChildRun | None = None
    release_example: list[Any] | None = None
    release_nonfinite: bool = False
    user_code: UserCode | None = None  # the program's user GPU code and what memcheck did (validate/memcheck.py)


def example_leaves(ep: Any) -> list[Any]:
    """The example inputs' leaves in the contract's order (the program's own example inputs)."""
    from torch.utils import _pytree as pytree

    args, kwargs = ep.example_inputs
    ordered = {k: kwargs[k] for k in spec_kwarg_order(ep.call_spec.in_spec, kwargs)}
    return list(pytree.tree_leaves((tuple(args), ordered)))


def _generated_samples(ep: Any, contract: IOContract, options: BuildOptions, out: Validation) -> list[Sample]:
    """The golden samples' inputs, the example first (notes on those not generated go to ``out``)."""
    guards = (contract.guards or ()) if options.allow_export_guards else ()  # accepted export guards: samples satisfy them
    thresholds = comparison_constants(ep)  # the edge-threshold sample's values (builder/thresholds.py)
    samples, notes = make_samples(contract, example_leaves(ep), seed=options.seed, guards=guards, thresholds=thresholds)
    out.findings += [warning("build.sample_dropped", "validate", note) for note in notes]
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


def _torch_in_child(run: ChildRun, facts: dict[str, Any]) -> Finding | None:
    """The child's host facts (into ``facts``); a finding when it cannot import torch (an env.*
    finding: the package was not opened yet, so it is never a load.crash)."""
    try:
        facts.update(run.worker.collect("facts", run.timeout) or {})
    except ChildFailure as exc:
        return failures.torch_import_finding(exc, PHASE)
    if "torch" in facts:
        return None
    return error(
        "env.torch_missing",
        PHASE,
        "the validation child cannot import torch, which this build process imported",
        expected="import torch succeeds in a fresh interpreter",
        found=str(facts.get("torch_error", "no torch"))[:300],
        hint="a sitecustomize, .pth file or PYTHONPATH entry that the children see differs from this process's; "
        + (f"the child found torch at {facts['torch_origin']}" if facts.get("torch_origin") else "check python -P -c 'import torch'"),
    )


def _load_release(run: ChildRun, ep: Any, configs: Mapping[str, Any], release_pt2: str, facts: dict[str, Any]) -> list[str] | None:
    """The release model loaded in the child (with the program's own weights when the package
    carries none). Returns the constant names it lists when it holds its own weights (None when
    they came from here, or the runtime cannot list them). Raises ChildFailure."""
    if run.imports:  # the child started before the build knew the program calls user ops: they register now
        run.worker.request("import_modules", run.timeout, modules=list(run.imports))
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
        return None
    fqns = loaded.get("constant_fqns")
    return [str(n) for n in fqns] if isinstance(fqns, list) else None


def _constant_names(run: ChildRun, ep: Any, release_pt2: str, loaded: list[str]) -> tuple[ConstantNames, list[Finding]]:
    """The package's names for the program's constants (compile/constant_names.py): the compiled model's
    own bytes, read in the child, pair a constant the compiler renamed."""
    tensors = program_tensors(ep)

    def package_digests(names: list[str]) -> Mapping[str, Any]:
        device_type = run.device.split(":", 1)[0]
        reply = run.worker.request(
            "constant_digests",
            run.timeout,
            path=release_pt2,
            names=names,
            model_name=layout.RELEASE_MODEL,
            device_type=device_type,
            device_index=run.device_index,
        )
        return dict(reply.get("digests") or {})

    try:
        names = pair_renamed(sorted(tensors), loaded, lambda fqn: tensor_digest(tensors[fqn]), package_digests)
    except ChildFailure as exc:
        return ConstantNames(), [
            warning(
                "build.constants_unnamed",
                PHASE,
                f"the package lists constants the program does not name ({', '.join(sorted(set(loaded) - set(tensors)))[:200]}), "
                f"and reading their values to pair them failed: {str(exc)[:200]}",
                hint="the manifest records the program's names; a probe will report the package's as unexpected",
            )
        ]
    return names, []


class SampleSteps(Protocol):
    """What validating one golden sample takes, step by step (``validate_each`` calls them)."""

    def eager(self, s: Sample) -> bool:
        """Fill ``s.outputs``; False when the sample is dropped (its finding is recorded)."""

    def fp64(self, s: Sample) -> list[Any] | None:
        """The sample's float64 reference outputs, or None."""

    def compiled(self, s: Sample) -> list[Any] | None:
        """The compiled model's outputs on ``s``, or None when it failed (recorded)."""

    def judge(self, s: Sample, compiled: list[Any], refs64: list[Any] | None) -> None:
        """Compare, and record the verdicts."""

    def done(self, s: Sample) -> None:
        """The sample has been validated (or dropped): keep what the package stores, free the rest."""

    def stopped(self) -> bool:
        """True once no further sample can run (the child is gone)."""


def validate_each(samples: Sequence[Sample], steps: SampleSteps, timings: list[dict[str, Any]] | None = None) -> list[Sample]:
    """Validate the samples one at a time; returns those eager accepted, in order.

    Each sample's outputs (eager, float64, compiled) exist only while it is being validated:
    ``done`` runs before the next sample's eager outputs are made. ``timings`` gets each sample's
    seconds per step (the build report's ``validate.detail.timings``: where validation's time goes)."""
    accepted: list[Sample] = []
    for s in samples:
        if steps.stopped():
            break
        clock = _StepClock(s.id)
        with clock("eager"):
            kept = steps.eager(s)
        if kept:
            accepted.append(s)
            with clock("fp64"):
                refs64 = steps.fp64(s)
            with clock("compiled"):
                compiled = steps.compiled(s)
            if compiled is not None:
                with clock("compare"):
                    steps.judge(s, compiled, refs64)
            del refs64, compiled
        steps.done(s)
        if timings is not None:
            timings.append(clock.seconds)
    return accepted


class _StepClock:
    """One sample's seconds per step, rounded for the report."""

    def __init__(self, sample: str) -> None:
        self.seconds: dict[str, Any] = {"sample": sample}

    @contextlib.contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[f"{step}_s"] = round(time.perf_counter() - started, 3)


class _Steps:
    """The real steps: eager and float64 here, the compiled model in the child, compare.py's
    comparison, the ONNX Runtime reference when asked for, and the package's golden store."""

    def __init__(
        self,
        subject: Subject,
        run: ChildRun,
        fp64: Float64Reference | None,
        reference: reference_onnx.Reference | None,
        out: Validation,
        *,
        fp64_rule: bool = True,
    ) -> None:
        self.eager_fn, self.contract, self.options, self.run = subject.eager_fn, subject.contract, subject.options, run
        self.fp64_reference, self.reference, self.out = fp64, reference, out
        self.index = {g.id: g for g in run.index}
        # A CUDA build compares on its GPU, a chunk at a time: on the CPU, full-size logits took minutes.
        on_gpu = self.options.device if self.options.device.startswith("cuda") else None
        self.comparison = Comparison(
            self.contract,
            allow_nonfinite=self.options.allow_nonfinite,
            tolerance=subject.tolerance,
            device=on_gpu,
            fp64_rule=fp64_rule,
        )
        self.child_failures: list[Finding] = []
        self.crashed: GoldenSample | None = None
        self.child_gone = False
        self.release_example: list[Any] | None = None  # the twin is compared with it
        self.store = GoldenStore(self.contract, self.options.golden_max_bytes, on_gpu)

    def eager(self, s: Sample) -> bool:
        if s.outputs:
            return True  # the example's, made before the child started
        finding = eager_output(self.eager_fn, self.contract, s, self.options.device)
        if finding is None:
            return True
        self.out.findings.append(finding)
        return False

    def fp64(self, s: Sample) -> list[Any] | None:
        refs = self.fp64_reference.outputs(s) if self.fp64_reference is not None else None
        free_cached_gpu_memory(self.options.device)  # the references' memory, before the child runs the sample
        return refs

    def compiled(self, s: Sample) -> list[Any] | None:
        g = self.index[s.id]
        got = compiled_sample(self.run, "release", g)
        if not isinstance(got, ChildFailure):
            if s.id == "example":
                self.release_example = got
            return got
        self.child_failures.append(failure_finding(got, f"running the compiled release model on golden sample {s.id}", "run"))
        if isinstance(got, ChildCrashed):
            self.crashed = g
        self.child_gone = not isinstance(got, ChildRaised)
        return None

    def judge(self, s: Sample, compiled: list[Any], refs64: list[Any] | None) -> None:
        rows = self.comparison.add(s, compiled, refs64)
        if not self.store.fits(s):  # kept compact: its digests hold the positions furthest from eager
            on_gpu = self.options.device if self.options.device.startswith("cuda") else None
            for spec, c, e in zip(self.contract.outputs, compiled, s.outputs):
                if hasattr(c, "shape") and hasattr(e, "shape"):
                    floors = stored_floor(spec.tensor.dtype) if spec.tensor else None
                    s.worst[spec.name] = _compact.worst_positions(c, e, floors[1] if floors else 0.0, on_gpu)
        if self.reference is not None:
            self.reference.compare(s, compiled, refs64, rows)

    def done(self, s: Sample) -> None:
        """Keep the sample in the package, whole or compact (golden_store.py), in order as they come."""
        dropped = self.store.keep(s)
        if dropped is not None:
            self.out.findings.append(dropped)

    def stopped(self) -> bool:
        return self.child_gone


@dataclass(frozen=True)
class ValidationJob:
    """What validation takes: the subject (the program, its eager model, configs, options and the
    build's tolerance, resolved once: every comparison, the stage bisection, the repro and the ONNX
    Runtime verdict judge by it), the child and the compiled release package, and the export
    step's results it reuses.

    ``example_outputs``: eager's outputs on the example from the export step: compared with this
    step's own eager run of the example, they say whether eager repeats itself (when it does not,
    the float64 rule is off: eager's noise must never widen a tolerance). ``user_samples``: the
    user's own (builder/export/user_samples.py, already checked against the contract), validated
    and stored after the generated ones."""

    subject: Subject
    work: str
    worker: Worker
    release_pt2: str
    example_outputs: Any = None
    user_samples: Sequence[Sample] = ()
    user_modules: tuple[str, ...] = ()  # imported in the child before the load (BuildState.user_modules)


def run_validation(job: ValidationJob) -> Validation:
    """Validate the compiled package against eager on every golden sample."""
    subject, out = job.subject, Validation()
    prepared = _prepared_samples(job, out)
    if prepared is None:
        return out
    samples, repeatable = prepared
    run = _child_run(job, samples)
    options = subject.options
    fp64 = Float64Reference(subject.eager_fn, subject.contract, options.device, samples[0]) if options.fp64_reference else None
    free_cached_gpu_memory(options.device)
    # Started before the compiled runs so the two overlap; killed on the way out whatever happens.
    with reference_onnx.reference(subject, job.work, run.golden_path, run.index) as reference:
        facts: dict[str, Any] = {}
        opened, loaded = _open_child(job, run, facts, out)
        if not opened:
            return out
        subject.note(
            "validating one sample at a time: eager" + (", float64" if fp64 is not None else "") + " and the compiled model in a child"
        )
        steps = _Steps(subject, run, fp64, reference, out, fp64_rule=repeatable)
        accepted = validate_each(samples, steps, out.timings)
        if fp64 is not None:
            fp64.close()
            if fp64.skipped is not None:
                out.findings.append(fp64.skipped)
        _child_outcome(job, steps, accepted, facts, out)
        result = steps.comparison.finish()
        out.findings += result.findings
        out.tolerances, out.table, out.margins = result.tolerances, result.table, result.margins
        out.sample_tolerances = result.sample_tolerances
        failed = next((f for f in result.findings if f.code == "build.validation_failed"), None)
        if failed is not None and not steps.child_gone:
            out.findings += _bisect(subject, run, samples, failed, out)
        if reference is not None:
            out.reference, ref_findings = reference.finish()
            out.findings += ref_findings
        if loaded is not None and not steps.child_gone:
            _name_constants(job, run, loaded, out)
        if not steps.child_failures:  # the debug_twin step checks the twin in the same child (twin_check.py)
            out.child_run, out.release_example = run, steps.release_example
            out.release_nonfinite = any(f.code == "build.nonfinite" for f in result.findings)
        _store_golden(steps.store, subject.note, out)
        return out


def _prepared_samples(job: ValidationJob, out: Validation) -> tuple[list[Sample], bool] | None:
    """The samples (generated, then the user's) with the example's eager outputs made first, alone:
    a model that fails on its own inputs fails before anything starts. Also whether eager repeats
    itself on the example (the float64 rule's condition). None when nothing can be validated."""
    subject = job.subject
    samples = [*_generated_samples(subject.ep, subject.contract, subject.options, out), *job.user_samples]
    if not samples:
        return None
    example_error = eager_output(subject.eager_fn, subject.contract, samples[0], subject.options.device)
    if example_error is not None:
        out.findings.append(example_error)
        return None
    out.eager_repeat = stages_mod.eager_repeat(subject.contract, samples[0].outputs, job.example_outputs, subject.tolerance)
    repeatable = out.eager_repeat is None or out.eager_repeat["status"] == stages_mod.AGREES
    if not repeatable:
        subject.note("eager gave two different answers on the example: the float64 rule is off (eager's noise is no floor)")
    subject.note(f"{len(samples)} golden sample(s): {', '.join(f'{s.id} ({sample_env(s)})' for s in samples)}")
    for s in samples:
        if s.note:
            subject.note(f"golden sample {s.id}: {s.note}")
    return samples, repeatable


def _child_run(job: ValidationJob, samples: Sequence[Sample]) -> ChildRun:
    """The samples' inputs written to a file of the child's own (no outputs in it), and how the
    child runs them."""
    contract, options = job.subject.contract, job.subject.options
    inputs_bytes, index = golden_payload(contract, [Sample(s.id, s.symbols, s.leaves) for s in samples])  # inputs only
    inputs_path = os.path.join(job.work, "golden-inputs.safetensors")
    with open(inputs_path, "wb") as fh:
        fh.write(inputs_bytes)
    del inputs_bytes
    device_index = int(options.device.split(":", 1)[1]) if ":" in options.device else None
    return ChildRun(job.worker, inputs_path, index, contract, options.device, device_index, job.work, options.timeout_s, job.user_modules)


def _open_child(job: ValidationJob, run: ChildRun, facts: dict[str, Any], out: Validation) -> tuple[bool, list[str] | None]:
    """torch in the child, then the release model loaded in it: (whether it opened, the constant
    names it lists). A crash on load climbs the probe's escalation ladder; failures go to ``out``."""
    broken = _torch_in_child(run, facts)
    if broken is not None:  # the environment's doing: no load was tried, nothing to escalate
        out.findings.append(broken)
        return False, None
    try:
        return True, _load_release(run, job.subject.ep, job.subject.configs, job.release_pt2, facts)
    except ChildFailure as exc:
        out.findings.append(failure_finding(exc, "loading the compiled release model", "load"))
        if isinstance(exc, ChildCrashed):
            job.subject.note("the child crashed loading the package: climbing the probe's escalation ladder")
            out.findings += diagnose.crash(job.release_pt2, run, facts, None, ESCALATE_S, job.subject.options.output)
        return False, None


def _child_outcome(job: ValidationJob, steps: _Steps, accepted: Sequence[Sample], facts: dict[str, Any], out: Validation) -> None:
    """After the samples: the coverage they reached, the child's failures, and a crash diagnosed."""
    options = job.subject.options
    out.coverage, gaps = coverage(job.subject.contract, accepted, guards_accepted=options.allow_export_guards)
    if gaps and not steps.child_gone:  # a child that died cut the samples short: its failure is the error
        out.findings.append(_coverage_finding(gaps, options.allow_partial_coverage))
    out.findings += steps.child_failures
    if steps.crashed is not None:
        job.subject.note(f"the child crashed on golden sample {steps.crashed.id}: climbing the probe's escalation ladder")
        out.findings += diagnose.crash(job.release_pt2, steps.run, facts, steps.crashed, ESCALATE_S, options.output)


def _name_constants(job: ValidationJob, run: ChildRun, loaded: list[str], out: Validation) -> None:
    """The package's names for the program's constants, with a note per renamed one."""
    out.constant_names, naming = _constant_names(run, job.subject.ep, job.release_pt2, loaded)
    out.findings += naming
    for fqn, name in sorted(out.constant_names.renamed.items()):
        job.subject.note(f"constant {fqn} is {name} in the package (the same bytes)")


def _store_golden(store: GoldenStore, note: Callable[[str], None], out: Validation) -> None:
    """What the package stores of the samples (whole, compact or dropped), into ``out``."""
    payload = store.payload(out.tolerances, out.sample_tolerances)
    if payload is not None:
        out.golden_bytes, out.index, out.compact = payload
    out.storage = store.rows
    for row in out.storage:
        if row["stored"] == "compact":
            note(f"golden sample {row['sample']} stored compact (over the cap): inputs {row['inputs']}; outputs {row['outputs']}")


def free_cached_gpu_memory(device: str) -> None:
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


def _bisect(subject: Subject, run: ChildRun, samples: Sequence[Sample], failed: Finding, out: Validation) -> list[Finding]:
    """The stage bisection (stages.py) on the first sample that failed, the package rerun in the child."""
    sample = next((s for s in samples if s.id == failed.evidence.get("sample")), None)
    if sample is None:
        return []
    golden = next(g for g in run.index if g.id == sample.id)

    def package() -> list[Any] | None:
        got = compiled_sample(run, "release", golden)
        return None if isinstance(got, ChildFailure) else got

    subject.note(f"compiled differs from eager on sample {sample.id}: rerunning the stages between them (eager, export, decompositions)")
    rows, findings = stages_mod.explain_failure(subject, sample, package)
    out.stages = [r.to_dict() for r in rows]
    dtype = precision.candidate(subject.ep, rows, subject.configs)
    if dtype is not None and findings and findings[0].code == "build.first_divergence":
        subject.note(f"compiled {dtype} differs from eager: rebuilding with {precision.CONFIG}=true to try it on sample {sample.id}")
        remedy = precision.verify(subject, sample, dtype, run.out_dir, lambda path: _run_other(run, path, golden))
        findings[0] = precision.with_remedy(findings[0], remedy)
    return findings


def _run_other(run: ChildRun, path: str, golden: GoldenSample) -> list[Any] | None:
    """Another package (the remedy's) loaded in the validation child beside the release model, run
    on one sample; None when it could not load or run."""
    try:
        run.worker.request("load", run.timeout, key="remedy", path=path, model_name=layout.RELEASE_MODEL, device_index=run.device_index)
    except ChildFailure:
        return None
    got = compiled_sample(run, "remedy", golden)
    return None if isinstance(got, ChildFailure) else got
