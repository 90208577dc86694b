"""Which stage made the package wrong: the manual workflow of PyTorch's debugging guides (find the
stage, then minimise) run on the sample that failed, before any cause is named.

Between the eager model and the package lie four stages; each is rerun on the failing sample's
inputs and compared with eager there, by the build's own tolerance:

  1. eager        the model called twice on one input (state, random ops, nondeterministic kernels)
  2. export       ``ep.module()``: what torch.export traced, with the guards it enforces
  3. decompose    ``ep.run_decompositions().module()``: the ATen decompositions Inductor lowers
  4. inductor     ``torch.compile`` of the exported program (JIT Inductor, no AOTI packaging); run
                  only when stages 1-3 agree and the package does not: it is the one compile
  5. package      the AOTInductor package itself (in the validation child)

The first stage that departs is the cause the finding names (``build.first_divergence``), with
every stage's numbers. A package that departs while torch.compile of the same program also does
is Inductor's; one that departs alone is AOTInductor's. Nothing here guesses: a stage that could
not run is ``skipped`` or ``raised``, and the finding says what is not known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aoti_guard.builder.golden import Sample
from aoti_guard.builder.validate.references import call_with_leaves, sample_env
from aoti_guard.builder.validate.repro import write_repro
from aoti_guard.builder.validate.subject import Subject
from aoti_guard.builder.validate.tolerance import ToleranceRule
from runtime_probe.package.manifest import IOContract
from runtime_probe.reporting.findings import Finding, error, warning
from runtime_probe.runtime.torch_compat import dynamo_reset

__all__ = [
    "AGREES",
    "COMPILER_STAGES",
    "DEPARTS",
    "RAISED",
    "SKIPPED",
    "STAGES",
    "StageRow",
    "bisect",
    "compare_outputs",
    "eager_repeat",
    "explain_failure",
    "first_departing",
    "stage_finding",
    "table_lines",
]

PHASE = "validate"
AGREES, DEPARTS, RAISED, SKIPPED = "agrees", "departs", "raised", "skipped"
STAGES = {
    "eager": "eager, called again on the same input",
    "export": "the exported program (ep.module())",
    "decompose": "the decomposed program (ep.run_decompositions().module())",
    "inductor": "torch.compile of the exported program (Inductor, without AOTI)",
    "package": "the AOTInductor package",
}
# Stages whose departure is the compiler's: a standalone repro is written for them.
COMPILER_STAGES = ("inductor", "package")


@dataclass(frozen=True)
class StageRow:
    """One stage rerun on the failing sample, compared with eager's first call."""

    stage: str
    status: str  # agrees | departs | raised | skipped
    max_abs: float | None = None  # worst |stage - eager| over the outputs (None: not compared)
    output: str | None = None  # the output with the worst error
    note: str | None = None  # the exception's first line, or why it was skipped

    def to_dict(self) -> dict[str, Any]:
        from runtime_probe.runtime.numerics import json_number

        return {
            "stage": self.stage,
            "what": STAGES[self.stage],
            "status": self.status,
            "max_abs": json_number(self.max_abs),  # inf as "inf": the manifest's JSON has no Infinity
            "output": self.output,
            "note": self.note,
        }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def compare_outputs(
    contract: IOContract, got: Sequence[Any], ref: Sequence[Any], tolerance: ToleranceRule
) -> tuple[str, float, str | None]:
    """(agrees|departs, worst max abs, the output it was on) by the build's tolerance per dtype."""
    import torch

    from runtime_probe.runtime import numerics

    worst, where, agree = 0.0, None, True
    for spec, a, b in zip(contract.outputs, got, ref):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if a != b:
                agree, where = False, spec.name
            continue
        check = tolerance.for_dtype(b.dtype)
        st = numerics.stats(a, b, atol=check.atol, rtol=check.rtol, equal_nan=True)
        if st.get("reason") is not None:
            return DEPARTS, float("inf"), spec.name
        err = st.get("max_abs")
        value = float(err) if isinstance(err, int | float) else float("inf")
        if where is None or value >= worst:
            worst, where = value, spec.name
        agree = agree and bool(st.get("passed"))
    return (AGREES if agree else DEPARTS), worst, where


def _run(fn: Callable[[], list[Any]]) -> tuple[list[Any] | None, str | None]:
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - a stage that raises is a result, not a crash of the build
        return None, _first_line(exc)


def bisect(subject: Subject, sample: Sample, package: Callable[[], list[Any] | None], *, compile_stage: bool = True) -> list[StageRow]:
    """Rerun the stages on ``sample``'s inputs; returns one row per stage, in order.

    ``package``: the package's outputs on the sample (the validation child), None when it failed.
    ``subject.tolerance``: the build's, by which each stage agrees with eager or departs.
    ``compile_stage``: allow the torch.compile stage (a compile of its own)."""
    ep, eager_fn, contract, tolerance = subject.ep, subject.eager_fn, subject.contract, subject.tolerance

    def call(fn: Any) -> list[Any]:
        return call_with_leaves(fn, contract, sample.leaves, subject.device)

    first, why = _run(lambda: call(eager_fn))
    if first is None:
        return [StageRow("eager", RAISED, note=why)]
    rows: list[StageRow] = []
    again, why = _run(lambda: call(eager_fn))
    rows.append(_row("eager", contract, again, first, why, tolerance))
    exported, why = _run(lambda: call(ep.module()))
    rows.append(_row("export", contract, exported, first, why, tolerance))
    subject.note("stage bisection: running the decomposed program")
    decomposed, why = _run(lambda: call(ep.run_decompositions().module()))
    rows.append(_row("decompose", contract, decomposed, first, why, tolerance))
    packaged = package()
    package_row = (
        _row("package", contract, packaged, first, None, tolerance)
        if packaged is not None
        else StageRow("package", RAISED, note="the validation child could not run it (see the run.* finding)")
    )
    earlier_agree = all(r.status == AGREES for r in rows)
    if not earlier_agree:
        rows.append(StageRow("inductor", SKIPPED, note="an earlier stage already departs"))
    elif package_row.status == AGREES:
        rows.append(StageRow("inductor", SKIPPED, note="the package agrees on this rerun"))
    elif not compile_stage:
        rows.append(StageRow("inductor", SKIPPED, note="not asked for"))
    else:
        subject.note("stage bisection: torch.compile of the exported program (one compile), to tell Inductor from AOTInductor")
        compiled, why = _run(lambda: _torch_compile_outputs(ep, contract, sample, subject.device))
        rows.append(_row("inductor", contract, compiled, first, why, tolerance))
    rows.append(package_row)
    return rows


def _torch_compile_outputs(ep: Any, contract: IOContract, sample: Sample, device: str) -> list[Any]:
    import torch

    compiled = torch.compile(ep.module(), backend="inductor", fullgraph=True)
    try:
        return call_with_leaves(compiled, contract, sample.leaves, device)
    finally:
        dynamo_reset()()


def _row(stage: str, contract: IOContract, got: list[Any] | None, ref: list[Any], why: str | None, tolerance: ToleranceRule) -> StageRow:
    if got is None:
        return StageRow(stage, RAISED, note=why)
    status, worst, where = compare_outputs(contract, got, ref, tolerance)
    return StageRow(stage, status, worst, where)


def first_departing(rows: Sequence[StageRow]) -> StageRow | None:
    """The first stage (in STAGES order) that departs from eager or raises."""
    for row in _ordered(rows):
        # torch.compile raising says nothing about the package's numbers: it only leaves Inductor
        # vs AOTInductor unknown (the package row, which follows, then departs)
        if row.status == DEPARTS or (row.status == RAISED and row.stage != "inductor"):
            return row
    return None


def _ordered(rows: Sequence[StageRow]) -> list[StageRow]:
    order = {name: i for i, name in enumerate(STAGES)}
    return sorted(rows, key=lambda r: order[r.stage])


def table_lines(rows: Sequence[StageRow]) -> list[str]:
    """The stage table as text lines."""
    out = []
    for r in _ordered(rows):
        err = "-" if r.max_abs is None else f"{r.max_abs:.3g}"
        tail = f" ({r.note})" if r.note else (f" on {r.output}" if r.output and r.status == DEPARTS else "")
        out.append(f"{r.stage:<9} {r.status:<8} max |stage - eager| {err}{tail}")
    return out


def stage_finding(rows: Sequence[StageRow], sample: Sample, *, graph_causes: Sequence[str] = (), repro: str | None = None) -> Finding:
    """``build.first_divergence``: the first stage that departs, with every stage's numbers.

    ``graph_causes``: what the export step found in the graph (random ops, buffer updates), named
    when eager departs. ``repro``: the standalone repro written for a compiler stage."""
    first = first_departing(rows)
    where = f"sample {sample.id} ({sample_env(sample)})"
    evidence: dict[str, Any] = {"sample": sample.id, "symbols": dict(sample.symbols), "stages": [r.to_dict() for r in rows]}
    if repro is not None:
        evidence["repro"] = repro
    found = "; ".join(f"{r.stage} {r.status}" + (f" {r.max_abs:.3g}" if r.max_abs is not None else "") for r in _ordered(rows))
    if first is None:
        return warning(
            "build.first_divergence",
            PHASE,
            f"rerun on {where}, no stage departs from eager: the difference validation saw did not reproduce",
            found=found,
            hint="a difference that comes and goes points at nondeterminism in the compiled code (atomics, thread counts); rerun the build",
            evidence=evidence,
        )
    evidence["first"] = first.stage
    err = f"max |stage - eager| {first.max_abs:.3g}" if first.max_abs is not None else first.note or ""
    message, hint = _explain(first, rows, where, err, graph_causes, repro)
    return error(
        "build.first_divergence", PHASE, message, expected="every stage agrees with eager", found=found, hint=hint, evidence=evidence
    )


def _explain(
    first: StageRow,
    rows: Sequence[StageRow],
    where: str,
    err: str,
    graph_causes: Sequence[str],
    repro: str | None,
) -> tuple[str, str]:
    """The finding's message and hint for the first stage that departs."""
    by_stage = {r.stage: r for r in rows}
    if first.stage == "eager":
        return _explain_eager(first, where, err, graph_causes)
    if first.stage == "export":
        return _explain_export(first, by_stage.get("package"), where, err)
    if first.stage == "decompose":
        return (
            f"the first stage that departs is the ATen decompositions: ep.run_decompositions() differs from eager on {where} ({err}) "
            "while the exported program agrees",
            "a decomposition changes the result: find the op with torch.export's decomposition table; report it to PyTorch",
        )
    return _explain_compiler(first, by_stage, where, err, repro)


def _explain_eager(first: StageRow, where: str, err: str, graph_causes: Sequence[str]) -> tuple[str, str]:
    """Eager itself departs: the model is not a function of its inputs, whatever the compiler does."""
    if first.status == RAISED:
        return f"eager raised when called again on {where}: {first.note}", "make the model run twice on one input"
    cause = (
        "the export step found " + "; ".join(graph_causes)
        if graph_causes
        else "the exported graph has no random op and no in-place buffer update: look for Python-side state or nondeterministic kernels"
    )
    return (
        f"the first stage that departs is eager itself: two calls on {where} differ ({err}); {cause}. "
        "The compiler is not the cause: no golden output can be checked against a model that changes its own answer",
        "make forward deterministic and free of state (model.eval(), no random ops, no in-place buffer updates); see "
        "build.nondeterministic / build.stateful_model",
    )


def _explain_export(first: StageRow, package: StageRow | None, where: str, err: str) -> tuple[str, str]:
    """torch.export departs: a guard it recorded refuses the input, or the traced program differs."""
    if first.status == RAISED and "Guard failed" in (first.note or ""):
        return (
            f"the first stage that departs is torch.export: the exported program refuses {where} ({first.note}). Export traced "
            "the branch of the example's sizes and recorded a guard for it; AOTInductor does not enforce that guard, so the "
            "package ran this input through the traced branch" + (f" (package: {_err(package)})" if package else ""),
            "build.export_specialized (export phase) lists the guards that restrict the declared dims, the golden samples "
            "that break each, and the fixes: an example that takes the general branch, torch._check, torch.cond or static "
            "dims; or accept them with --allow-export-guards (the loader then enforces them)",
        )
    return (
        f"the first stage that departs is torch.export: the exported program differs from eager on {where} ({err})",
        "export changed the model's behaviour: compare ep.module() with the model on this input (torch.export's docs on "
        "specialization and non-strict tracing say what can differ)",
    )


def _explain_compiler(first: StageRow, by_stage: dict[str, StageRow], where: str, err: str, repro: str | None) -> tuple[str, str]:
    """Inductor or the package departs while the programs agree: torch.compile's row tells which."""
    repro_text = f"; a standalone repro (plain torch) is in {repro}" if repro else ""
    inductor = by_stage.get("inductor")
    if first.stage == "inductor":
        return (
            f"the first stage that departs is Inductor: torch.compile of the exported program differs from eager on {where} ({err}), "
            f"as the package does ({_err(by_stage.get('package'))}), while the exported and decomposed programs agree{repro_text}",
            "Inductor's generated code computes this differently: attach the repro to a PyTorch issue, or --minify to reduce it; "
            "loosen with --atol/--rtol if the error is acceptable",
        )
    if inductor is not None and inductor.status == AGREES:
        return (
            f"the first stage that departs is the AOTInductor package: it differs from eager on {where} ({err}) while torch.compile "
            f"of the same program agrees ({_err(inductor)}){repro_text}",
            "AOTInductor alone (not Inductor's kernels) is wrong here: attach the repro to a PyTorch issue, or --minify to reduce it",
        )
    unknown = inductor.note if inductor is not None and inductor.note else "torch.compile could not be compared"
    return (
        f"the first stage that departs is the compiled package: it differs from eager on {where} ({err}) while the exported and "
        f"decomposed programs agree; whether Inductor or AOTInductor is not known ({unknown}){repro_text}",
        "attach the repro to a PyTorch issue, or --minify to reduce it",
    )


def _err(row: StageRow | None) -> str:
    if row is None:
        return "not run"
    if row.max_abs is None:
        return row.status + (f": {row.note}" if row.note else "")
    return f"max |stage - eager| {row.max_abs:.3g}"


def eager_repeat(contract: IOContract, outputs: Sequence[Any], earlier: Any, tolerance: ToleranceRule) -> dict[str, Any] | None:
    """Eager's example outputs from the export step (``earlier``, the model's output) against
    validation's (``outputs``, leaves in contract order): two calls on one input. None when there
    is nothing to compare."""
    import torch
    from torch.utils import _pytree as pytree

    if earlier is None:
        return None
    before = [t.detach().to("cpu") if isinstance(t, torch.Tensor) else t for t in pytree.tree_leaves(earlier)]
    if len(before) != len(outputs):
        return None
    status, worst, output = compare_outputs(contract, outputs, before, tolerance)
    return {"status": status, "max_abs": worst, "output": output}


def explain_failure(subject: Subject, sample: Sample, package: Callable[[], list[Any] | None]) -> tuple[list[StageRow], list[Finding]]:
    """Bisect ``sample``, write the standalone repro when a compiler stage departs, and name the
    first stage (``build.first_divergence``), judged by ``subject.tolerance`` (the build's)."""
    rows = bisect(subject, sample, package)
    first = first_departing(rows)
    repro: str | None = None
    findings: list[Finding] = []
    if first is not None and first.stage in COMPILER_STAGES:
        repro, why = write_repro(subject, sample)
        if repro is None:
            findings.append(warning("build.first_divergence", PHASE, f"no standalone repro was written: {why}", hint="see --minify"))
    return rows, [stage_finding(rows, sample, graph_causes=subject.graph_causes, repro=repro), *findings]
