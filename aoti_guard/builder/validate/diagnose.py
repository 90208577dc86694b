"""The build explains its own failures with the probe's instruments (not a copy of them).

A child that crashed loading or running the release package climbs runtime_probe's escalation
ladder, in the same run: native frames, the C++ runtime mismatch and its verified LD_PRELOAD
remedy, with the durable fix (the build's compiler and the process's libstdc++). A NaN that the
debug twin printed is reported like the probe reports it: the first buffer holding it and the
kernel that wrote it, past the Inf the golden samples hold by design.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aoti_guard.builder.validate.child_run import ChildRun
from runtime_probe.ladder import printer
from runtime_probe.ladder.findings import twin_findings
from runtime_probe.ladder.readers import kernel_trace
from runtime_probe.ladder.steps import LadderContext, Replay, run_ladder
from runtime_probe.package.archive import open_archive
from runtime_probe.package.manifest import GoldenSample
from runtime_probe.reporting.findings import Finding, error, info, warning

__all__ = ["build_compiler", "crash", "twin_nonfinite"]

PHASE = "validate"
TWIN_PHASE = "debug_twin"  # the twin is checked after validation, in its own step


def build_compiler() -> str | None:
    """The C++ compiler Inductor uses here, with its version (what the durable fix names)."""
    try:
        from aoti_guard.builder.compile.toolchain import compiler_version
        from runtime_probe.runtime.torch_compat import cpp_compiler

        cxx = cpp_compiler()
        return compiler_version(cxx) or cxx
    except Exception:  # noqa: BLE001 - best effort: the diagnosis goes on without the name
        return None


def crash(
    release_pt2: str, run: ChildRun, host: Mapping[str, Any], sample: GoldenSample | None, budget_s: float, shown: str | None = None
) -> list[Finding]:
    """The ladder's findings for a crash loading (``sample`` None) or running the release package."""
    archive, _ = open_archive(release_pt2)
    if archive is None:
        return []
    replay = (
        Replay("run", "crash", run.run_args(sample), sample=f"golden sample {sample.id}") if sample is not None else Replay("load", "crash")
    )
    try:
        ctx = LadderContext(
            path=release_pt2,
            archive=archive,
            manifest=None,  # the manifest is written after validation
            device_type=run.device.split(":", 1)[0],
            device_index=run.device_index,
            python=None,
            env=run.child_env(),
            tmp=tempfile.mkdtemp(dir=run.out_dir, prefix="ladder-"),
            host=host,
            deadline=time.monotonic() + budget_s,
            step_timeout=run.timeout,
            built_with=build_compiler(),
            shown_path=shown,  # the remedy's command names the package the user asked for
        )
        return run_ladder(ctx, replay)
    finally:
        archive.close()


def twin_nonfinite(
    stdout: str,
    stderr: str,
    device_type: str,
    *,
    release_nonfinite: bool,
    baseline: Mapping[str, Sequence[str]] | None = None,
    samples: Sequence[str] = ("example",),
) -> list[Finding]:
    """What the twin's run on the example says about non-finite values (the probe's reading of
    the same output, ``ladder.findings.twin_findings``).

    A level-2 twin (ladder/printer.py) prints every kernel's values: when the release model's
    outputs held NaN/Inf, an error naming the first NaN's buffer and kernel (past the Inf the
    golden samples hold, ``baseline``); when they were finite, an info naming the values that hold
    Inf by design (an additive -inf attention mask): the package records them, and the probe's
    escalation looks past them.

    A twin that printed no values (kernel names only, with NaN asserts) is read as before: its
    assert names the buffer it stopped at."""
    prints = printer.parse_prints(stdout)
    if prints:
        return _printed(prints, stdout, stderr, release_nonfinite, dict(baseline or {}), samples)
    kind = "nonfinite" if release_nonfinite else "error"
    found, _ = twin_findings(stdout, stderr, replay_kind=kind, device_type=device_type, crash_signal=None)
    out: list[Finding] = []
    for f in found:
        if f.code != "run.nonfinite":
            continue
        evidence = {**f.evidence, "stderr_tail": stderr[-2000:], "release_outputs_finite": not release_nonfinite}
        if f.severity.value != "error":
            out.append(info("build.nonfinite", TWIN_PHASE, f"the debug twin: {f.message}", hint=f.hint, evidence=evidence))
        elif release_nonfinite:
            out.append(
                error(
                    "build.nonfinite",
                    TWIN_PHASE,
                    f"the debug twin's NaN asserts: {f.message}",
                    found=f.found,
                    hint=f.hint,
                    evidence=evidence,
                )
            )
        else:
            out.append(
                warning(
                    "build.nonfinite",
                    TWIN_PHASE,
                    f"the release model's outputs are finite and match eager, but the debug twin's NaN/Inf asserts stop at an "
                    f"intermediate value: {f.message}",
                    found=f.found,
                    hint="an Inf inside the model is often intended (a -inf attention mask); this twin's asserts stop at it, "
                    "so a probe escalating to this twin names it first",
                    evidence=evidence,
                )
            )
    return out


def _printed(
    prints: Sequence[printer.Print],
    stdout: str,
    stderr: str,
    release_nonfinite: bool,
    baseline: Mapping[str, Sequence[str]],
    samples: Sequence[str],
) -> list[Finding]:
    held = ", ".join(f"{name} ({'/'.join(kinds)})" for name, kinds in list(baseline.items())[:8])
    more = f" and {len(baseline) - 8} more" if len(baseline) > 8 else ""
    on = ", ".join(samples)
    if release_nonfinite:
        infs = {name: [k for k in kinds if k != "nan"] for name, kinds in baseline.items()}
        first = printer.first_departure(prints, infs) or printer.first_departure(prints, {})
        if first is None:
            return []
        where = f"written by kernel {first.kernel}" if first.kernel else "a graph input, on entry"
        past = f", past the Inf the golden samples hold: {held}{more}" if any(infs.values()) else ""
        return [
            error(
                "build.nonfinite",
                TWIN_PHASE,
                f"the debug twin: the first {first.kind} on golden sample example appears in {first.name}, {where}{past}",
                found=f"{first.kind} in {first.name}",
                hint=f"inspect {first.kernel or first.name} in the package's generated code (aoti-guard inspect) and the inputs "
                "that reach it; every value written before it is finite or an intended Inf",
                evidence={
                    "kernel": first.kernel,
                    "buffer": first.name,
                    "kinds": list(first.kinds),
                    "launched": list(dict.fromkeys(kernel_trace(stdout).launched)),
                    "stderr_tail": stderr[-2000:],
                },
            )
        ]
    if not baseline:
        return []
    return [
        info(
            "build.nonfinite",
            TWIN_PHASE,
            f"the release model's outputs are finite and match eager; inside it, the debug twin saw {len(baseline)} value(s) hold "
            f"NaN/Inf on the golden samples ({on}): {held}{more}",
            hint="an Inf inside the model is often intended (a -inf attention mask): the package records these as the twin's "
            "baseline, and a probe escalating to the twin looks past them to the first NaN, or an Inf where none was",
            evidence={"baseline": {k: list(v) for k, v in baseline.items()}, "samples": list(samples)},
        )
    ]
