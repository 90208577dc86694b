"""The debug twin checked in the validation child, after validation (the build's debug_twin step).

The twin compiles beside the release model (builder/twin/schedule.py); validation runs while it finishes,
and this check then loads the twin into the child that already holds the release model: it must
load, run the example, print kernel names and agree with the release model; its printed values
on every golden sample are the non-finite baseline the probe's escalation reads against.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.twin import schedule as twin_mod
from aoti_guard.builder.validate import diagnose
from aoti_guard.builder.validate.child_run import ChildRun
from aoti_guard.builder.validate.run import Validation, compiled_sample, failure_finding, free_cached_gpu_memory, ran_sample
from runtime_probe.child.worker import ChildFailure
from runtime_probe.ladder import printer
from runtime_probe.ladder.readers import kernel_trace
from runtime_probe.reporting.findings import Finding, warning
from runtime_probe.runtime import layout

__all__ = ["check_twin", "kernel_names", "run_twin"]

PHASE = "debug_twin"


def check_twin(outcome: Validation, twin_pt2: str, release_pt2: str, options: BuildOptions) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The twin's check in validation's child, or ``(None, [])`` when validation left no child to
    run it in (a run failed or crashed there: validation's findings say why)."""
    run = outcome.child_run
    if run is None:
        return None, []
    free_cached_gpu_memory(options.device)  # the comparisons' copies, before the child runs the twin
    shares = twin_mod.weights(options.twin_weights, options.device) == "release"
    shared = {"path": release_pt2, "model_name": layout.RELEASE_MODEL} if shares else None
    return run_twin(
        run, twin_pt2, layout.TWIN_MODEL, outcome.release_example, release_nonfinite=outcome.release_nonfinite, constants_from=shared
    )


def kernel_names(stdout: str) -> list[str]:
    """Kernel names the twin's printer announced (before_launch lines), in order, distinct."""
    return list(dict.fromkeys(kernel_trace(stdout).launched))


def _twin_on_the_other_samples(run: ChildRun, seconds: dict[str, float]) -> dict[str, list[printer.Print]]:
    """The twin's printed values on every golden sample after the example: the non-finite
    baseline is what any of them holds (a padded sample's mask may hold -inf where the example's
    holds none). A sample the twin fails on adds nothing; the example's run already said why."""
    out: dict[str, list[printer.Print]] = {}
    for g in run.index:
        if g.id == "example":
            continue
        mark, started = run.worker.stdout.total, time.perf_counter()
        if ran_sample(run, "twin", g) is not None:
            break
        out[g.id] = printer.parse_prints(run.worker.stdout.since(mark))
        seconds[g.id] = round(time.perf_counter() - started, 3)  # what the baseline costs the build (docs/benchmarks.md)
    return out


def run_twin(
    run: ChildRun,
    twin_path: str,
    twin_model: str,
    release: Sequence[Any] | None,
    *,
    release_nonfinite: bool = False,
    constants_from: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[Finding]]:
    """Load the twin and run the example sample: it must load, run, print kernel names and agree
    with the release model (``release``: its outputs on the example); then the other golden
    samples, for the non-finite baseline (``nonfinite`` in the result: what the probe's escalation
    reads the twin's printed values against). A NaN it prints is an error naming buffer and kernel. ``constants_from`` (``{"path", "model_name"}``):
    the twin has no weights of its own and is given that package model's first."""
    not_loaded = _load_twin(run, twin_path, twin_model, constants_from)
    if not_loaded is not None:
        return {}, [not_loaded]
    out_mark, err_mark = run.worker.stdout.total, run.worker.stderr.total
    example = next(g for g in run.index if g.id == "example")
    started = time.perf_counter()
    twin = compiled_sample(run, "twin", example)
    seconds = {example.id: round(time.perf_counter() - started, 3)}
    twin_failed = (
        [failure_finding(twin, "running the compiled twin model on golden sample example", "run")] if isinstance(twin, ChildFailure) else []
    )
    printed, errors = run.worker.stdout.since(out_mark), run.worker.stderr.since(err_mark)
    runs = {example.id: printer.parse_prints(printed)}
    if not isinstance(twin, ChildFailure):
        runs.update(_twin_on_the_other_samples(run, seconds))
    baseline = printer.baseline(runs.values())
    findings = diagnose.twin_nonfinite(
        printed, errors, run.device.split(":", 1)[0], release_nonfinite=release_nonfinite, baseline=baseline, samples=list(runs)
    )
    if not any(f.code == "build.nonfinite" and f.severity.value in ("error", "warning") for f in findings):  # else: the assert is the why
        hint = "the release model is unaffected"
        findings += [warning("build.twin_failed", PHASE, f.message, hint=hint, evidence=f.evidence) for f in twin_failed]
    info_: dict[str, Any] = {"kernels": kernel_names(printed), "seconds": seconds}  # per sample, printing and parsing included
    if any(runs.values()):  # a level-2 twin printed values: what the escalation reads them against
        info_["nonfinite"] = {"samples": list(runs), "names": baseline}
    if not isinstance(twin, ChildFailure) and release is not None:
        info_["max_abs_vs_release"] = _max_abs(twin, release)
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


def _load_twin(run: ChildRun, twin_path: str, twin_model: str, constants_from: Mapping[str, str] | None) -> Finding | None:
    """The twin loaded in the child (given ``constants_from``'s weights when it has none of its
    own); a warning when it cannot be: the release model is unaffected."""
    load_args = {"constants_from": dict(constants_from)} if constants_from is not None else {}
    try:
        run.worker.request(
            "load", run.timeout, key="twin", path=twin_path, model_name=twin_model, device_index=run.device_index, **load_args
        )
    except ChildFailure as exc:
        f = failure_finding(exc, "loading the debug twin", "load")
        hint = "the release model is unaffected; the probe will not be able to escalate to the twin"
        return warning("build.twin_failed", PHASE, f.message, hint=hint, evidence=f.evidence)
    return None


def _max_abs(twin: Sequence[Any], release: Sequence[Any]) -> float:
    """The twin's worst difference from the release model over the floating outputs they share."""
    diffs = []
    for a, b in zip(twin, release):
        if a is not None and b is not None and a.shape == b.shape and a.is_floating_point():
            diffs.append(float((a.double() - b.double()).abs().nan_to_num(0.0).max().item()) if a.numel() else 0.0)
    return max(diffs, default=0.0)
