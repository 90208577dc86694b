"""Inductor's elision of precision casts, named as the cause of a compiled vs eager difference only
once the remedy, tried on the failing sample, makes the package agree with eager.

Eager rounds the result of every float16/bfloat16 op to that dtype. Inductor fuses the ops into one
kernel that computes in float32 and rounds only what it stores (pytorch#159239): the intermediates
are upcast. A product that overflows float16 in eager (inf) stays finite in the package, and
everything after it differs (``isinf`` False where eager says True: pytorch#183607). Inductor's
``emulate_precision_casts`` rounds each intermediate as eager does.

When the stage bisection (stages.py) finds a compiler stage departing first on a program that
computes in float16 or bfloat16, ``verify`` compiles the program again with that config added to
the build's own, runs the new package in the validation child on the failing sample, and compares
it with eager by the build's tolerance. The ``build.first_divergence`` finding then says either
that the remedy is VERIFIED on that sample, or that it does not help (no remedy is offered that
was not seen to work).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from aoti_guard.builder.golden import Sample
from aoti_guard.builder.validate.references import call_with_leaves
from aoti_guard.builder.validate.stages import AGREES, COMPILER_STAGES, StageRow, compare_outputs, first_departing
from aoti_guard.builder.validate.subject import Subject
from runtime_probe.reporting.findings import Finding

__all__ = ["CONFIG", "FLAG", "HALF", "Remedy", "candidate", "half_dtype", "verify", "with_remedy"]

CONFIG = "emulate_precision_casts"
FLAG = f"--inductor-config {CONFIG}=true"
HALF = ("float16", "bfloat16")
# Never carried into the remedy's package: it must hold its own weights to run alone in the child.
_DROPPED = ("aot_inductor.package_constants_in_so", "aot_inductor.package_constants_on_disk_format")


@dataclass(frozen=True)
class Remedy:
    """The remedy tried on the failing sample: did the package built with it agree with eager?"""

    verified: bool
    dtype: str  # the half-precision dtype the program computes in
    sample: str
    max_abs: float | None = None  # worst |remedy package - eager| (None: it did not run)
    note: str = ""  # why it could not be tried, when it could not

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": f"{CONFIG}=true",
            "flag": FLAG,
            "verified": self.verified,
            "dtype": self.dtype,
            "sample": self.sample,
            "max_abs": self.max_abs,
            "note": self.note or None,
        }


def half_dtype(ep: Any) -> str | None:
    """float16 or bfloat16 when the program computes in it (any value of its graph), else None."""
    import torch

    found = set()
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        for v in val if isinstance(val, (list, tuple)) else (val,):
            if isinstance(v, torch.Tensor):
                found.add(str(v.dtype).replace("torch.", ""))
    return next((d for d in HALF if d in found), None)


def candidate(ep: Any, rows: list[StageRow], configs: Mapping[str, Any]) -> str | None:
    """The half dtype when the remedy is worth a compile: a compiler stage departs first, the
    program computes in float16/bfloat16, and the build did not already emulate the casts."""
    from aoti_guard.builder.compile.aoti import has_config

    first = first_departing(rows)
    if first is None or first.stage not in COMPILER_STAGES or str(configs.get(CONFIG)).lower() in ("true", "1"):
        return None
    if not has_config(CONFIG):
        return None
    return half_dtype(ep)


def verify(subject: Subject, sample: Sample, dtype: str, work: str, run_package: Callable[[str], list[Any] | None]) -> Remedy:
    """Compile the program again with ``emulate_precision_casts`` (and the build's configs,
    ``subject.configs``) into ``work``, run it on ``sample`` (``run_package``: loads a package in the validation child and
    returns its outputs on the sample, None when it failed) and compare with eager."""
    from aoti_guard.builder.compile.aoti import CompileError, compile_files
    from aoti_guard.pt2.writer import package_release

    configs = {k: v for k, v in subject.configs.items() if k not in _DROPPED}
    configs[CONFIG] = True
    path = os.path.join(work, "remedy-emulate-precision-casts.pt2")
    try:
        package_release(path, compile_files(subject.ep, configs))
    except CompileError as exc:
        return Remedy(False, dtype, sample.id, note=f"the rebuild with {CONFIG}=true failed: {exc}")
    got = run_package(path)
    if got is None:
        return Remedy(False, dtype, sample.id, note=f"the package rebuilt with {CONFIG}=true could not run on the sample")
    eager = call_with_leaves(subject.eager_fn, subject.contract, sample.leaves, subject.device)
    status, worst, _output = compare_outputs(subject.contract, got, eager, subject.tolerance)
    return Remedy(status == AGREES, dtype, sample.id, worst)


def with_remedy(finding: Finding, remedy: Remedy) -> Finding:
    """``build.first_divergence`` with what the remedy did: the cause and the flag when it made
    the package agree with eager (VERIFIED), else that it does not help."""
    evidence = {**finding.evidence, "remedy": remedy.to_dict()}
    err = f"max |package - eager| {remedy.max_abs:.3g}" if remedy.max_abs is not None else remedy.note
    if remedy.verified:
        cause = (
            f"cause: Inductor elides the {remedy.dtype} casts eager performs (upcast intermediates): a value eager rounds "
            f"to {remedy.dtype} (overflowing to inf) stays float32 inside the compiled kernel. Remedy VERIFIED on sample "
            f"{remedy.sample}: the package rebuilt with {CONFIG}=true agrees with eager there ({err})"
        )
        hint = f"rebuild with {FLAG} (verified on sample {remedy.sample}: it makes the package round as eager does)"
        return replace(finding, message=f"{finding.message}. {cause}", hint=hint, evidence={**evidence, "cause": "precision_cast_elision"})
    tried = (
        f"not Inductor's elision of {remedy.dtype} casts alone: the package rebuilt with {CONFIG}=true still differs from "
        f"eager on sample {remedy.sample} ({err})"
        if remedy.max_abs is not None
        else f"whether Inductor's elision of {remedy.dtype} casts is the cause is not known: {remedy.note}"
    )
    return replace(finding, message=f"{finding.message}. {tried}", evidence=evidence)
