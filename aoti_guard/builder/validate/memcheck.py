"""The build's memcheck of user GPU code: each golden sample once more, under compute-sanitizer.

Eager runs the user's Triton kernel or custom op too, so an out-of-bounds read compares equal and
validation passes (issue 43). When the program holds such code (builder/export/user_code.py), or with
``--memcheck``, the release package is loaded in a validation child under memcheck with the
caching allocator off and every golden sample that validation ran is run once; an invalid access
rejects the package (``build.out_of_bounds``), naming the kernel, the sample and its sizes. The
running and reading are runtime_probe's (ladder/memcheck.py), the probe's escalation uses the same.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.validate.child_run import ChildRun
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.ladder import memcheck as _memcheck
from runtime_probe.package.manifest import UserCode
from runtime_probe.reporting.findings import Finding
from runtime_probe.runtime import layout

__all__ = ["check"]

PHASE = "validate"


def check(
    run: ChildRun | None, release_pt2: str, options: BuildOptions, user_code: UserCode | None, note: Callable[[str], None]
) -> tuple[UserCode, list[Finding], dict[str, Any]]:
    """Memcheck over the golden samples when ``_memcheck.decide`` says so. Returns the user code
    with what memcheck did (the manifest records it), the findings, and the phase's detail.
    ``run``: validation's child run, None when a sample already failed there (nothing to add)."""
    code = user_code or UserCode()
    wanted, why = _memcheck.decide(options.memcheck, options.device.split(":", 1)[0], code)
    if not wanted:
        return dataclasses.replace(code, memcheck=why), [], {"status": why}
    if run is None:
        why = "not run: a golden sample already failed in validation's child"
        return dataclasses.replace(code, memcheck=why), [], {"status": why}
    note(f"memcheck ({why}): {len(run.index)} golden sample(s) once more under compute-sanitizer, caching allocator off")
    target = _memcheck.MemcheckTarget(
        release_pt2,
        layout.RELEASE_MODEL,
        run.device_index,
        env={"TMPDIR": run.worker.env.get("TMPDIR")},  # the build's child TMPDIR: removed with its work folder
        weights=_weights_args(run),
    )
    runs = [_memcheck.MemcheckRun(f"golden sample {g.id}", run.run_args(g)) for g in run.index]
    result = _memcheck.run_memcheck(target, runs, run.timeout)
    findings = _memcheck.findings(result, PHASE, "build.out_of_bounds", what="the release model")
    status = {
        "clean": f"passed: {len(result.ran)} golden sample(s), 0 errors, {result.seconds:.1f} s",
        "errors": f"failed: out-of-bounds access on {result.sample.label if result.sample else 'load'}",
    }.get(result.status, f"not run: {result.reason}")
    note(f"memcheck {status}")
    return dataclasses.replace(code, memcheck=status), findings, {**result.detail(), "why": why}


def _weights_args(run: ChildRun) -> dict[str, Any] | None:
    """The child's load_weights arguments when validation gave the release model the program's
    weights (a package without weights: run.py's ``_load_release`` wrote them here)."""
    path = os.path.join(run.out_dir, "weights.safetensors")
    if not os.path.exists(path):
        return None
    names = sorted(_safetensors.read_header(path).tensors)
    return {"weights_path": path, "device": run.device, "names": names}
