"""The build explains its own failures with the probe's instruments (not a copy of them).

A child that crashed loading or running the release package climbs runtime_probe's escalation
ladder, in the same run: native frames, the C++ runtime mismatch and its verified LD_PRELOAD
remedy, with the durable fix (the build's compiler and the process's libstdc++). A NaN that the
debug twin's asserts caught is reported like the probe reports it: the first buffer holding it
and the kernel that wrote it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from typing import Any

from aoti_guard.builder.validate.child_run import ChildRun
from runtime_probe.findings import Finding, error, info, warning
from runtime_probe.ladder.findings import twin_findings
from runtime_probe.ladder.steps import LadderContext, Replay, run_ladder
from runtime_probe.package.archive import open_archive
from runtime_probe.package.manifest import GoldenSample

__all__ = ["build_compiler", "crash", "twin_nonfinite"]

PHASE = "validate"


def build_compiler() -> str | None:
    """The C++ compiler Inductor uses here, with its version (what the durable fix names)."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        from aoti_guard.builder.toolchain import compiler_version

        cxx = get_cpp_compiler()
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
    replay = Replay("run", "crash", run.run_args(sample)) if sample is not None else Replay("load", "crash")
    try:
        ctx = LadderContext(
            path=release_pt2,
            archive=archive,
            manifest=None,  # the manifest is written after validation
            device_type=run.device.split(":", 1)[0],
            device_index=run.device_index,
            python=None,
            env={"TMPDIR": run.worker.env.get("TMPDIR")},  # the build's child TMPDIR: removed with its work folder
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


def twin_nonfinite(stdout: str, stderr: str, device_type: str, *, release_nonfinite: bool) -> list[Finding]:
    """The twin's NaN/Inf assert: the first buffer holding it, the kernel that wrote it (the
    probe's reading of the same output, ``ladder.findings.twin_findings``).

    An error when the release model's outputs held NaN/Inf too (the twin then says where it
    began). When they were finite and matched eager, a warning: an intermediate Inf is how masked
    attention works (a -inf bias; GPT-2 with a cache on CUDA, docs/zoo.md), and the release
    model is right, but the twin's asserts stop there on every call, so the probe's escalation to
    the twin will name this buffer first.

    On CPU Inductor emits the asserts for the graph's inputs only, so no buffer can be named: when
    the release output held NaN/Inf, the kernels that ran, in order, are reported instead (info).
    """
    kind = "nonfinite" if release_nonfinite else "error"
    found, _ = twin_findings(stdout, stderr, replay_kind=kind, device_type=device_type, crash_signal=None)
    out: list[Finding] = []
    for f in found:
        if f.code != "run.nonfinite":
            continue
        evidence = {**f.evidence, "stderr_tail": stderr[-2000:], "release_outputs_finite": not release_nonfinite}
        if f.severity.value != "error":
            out.append(info("build.nonfinite", PHASE, f"the debug twin: {f.message}", hint=f.hint, evidence=evidence))
        elif release_nonfinite:
            out.append(
                error("build.nonfinite", PHASE, f"the debug twin's NaN asserts: {f.message}", found=f.found, hint=f.hint, evidence=evidence)
            )
        else:
            out.append(
                warning(
                    "build.nonfinite",
                    PHASE,
                    f"the release model's outputs are finite and match eager, but the debug twin's NaN/Inf asserts stop at an "
                    f"intermediate value: {f.message}",
                    found=f.found,
                    hint="an Inf inside the model is often intended (a -inf attention mask); the twin stops there on every call, "
                    "so a probe escalating to the twin will name this buffer first",
                    evidence=evidence,
                )
            )
    return out
