"""The build's debug_twin step, and where the twin's files and configs are (the compile step
starts the twin's child with them: pipeline.py)."""

from __future__ import annotations

import os
from typing import Any

from aoti_guard.builder import resources
from aoti_guard.builder.compile import aoti as compile_mod
from aoti_guard.builder.state import BuildState
from aoti_guard.builder.twin import schedule as twin_mod
from aoti_guard.builder.validate import twin_check
from aoti_guard.pt2 import writer as package_mod
from runtime_probe.reporting.findings import Finding, Severity, info, warning
from runtime_probe.reporting.recorder import StepResult
from runtime_probe.runtime import layout

__all__ = ["twin_configs", "twin_dir", "twin_path", "twin_step"]


def twin_configs(st: BuildState) -> dict[str, Any]:
    own = twin_mod.weights(st.options.twin_weights, st.options.device) == "own"
    return compile_mod.twin_configs(st.configs, own_weights=own)


def twin_dir(st: BuildState) -> str:
    return os.path.join(st.work, "twin")


def twin_path(st: BuildState) -> str:
    stem = os.path.splitext(os.path.basename(st.out_path))[0]
    return os.path.join(twin_dir(st), f"{stem}.pt2")


def twin_step(st: BuildState) -> StepResult:
    """The sanitized debug twin (the kernel value printer); a failure only warns.

    Where it compiles is builder/twin/schedule.py's choice: in a child started with the release compile,
    which validation overlaps (this step then waits for what is left of it), or here. Then it is
    checked in validation's child (validate/twin_check.py): the example, the other samples'
    non-finite baseline, and the release model's outputs to agree with."""
    if not st.options.debug_twin:
        return [], {"skipped": "--no-debug-twin"}
    compiled, compile_detail = _twin_compiled(st)
    findings, detail = list(compiled), dict(compile_detail or {})
    if st.twin_pt2 is None or st.outcome is None:
        return findings, detail
    st.note("running the debug twin")
    st.outcome.twin_info, checked = twin_check.check_twin(st.outcome, st.twin_pt2, st.release_pt2, st.options)
    if st.outcome.twin_info is None:
        detail["check"] = "not run: validation left no child with the release model loaded (see the validate phase)"
    else:
        detail["check"] = st.outcome.twin_info
    return [*findings, *checked], detail


def _twin_compiled(st: BuildState) -> StepResult:
    """Wait for the twin's child, or compile the twin here; ``st.twin_pt2`` is set when it compiled."""
    os.makedirs(twin_dir(st), exist_ok=True)
    child, st.twin_child = st.twin_child, None
    detail: dict[str, Any] = {"where": "this process, after the release model"}
    if child is not None:
        st.note("waiting for the debug twin's child process")
        result = child.wait(st.options.timeout_s)
        if result.ok:
            st.twin_pt2 = twin_path(st)
            return [], {"where": "a child process, beside the release compile", "child_s": round(result.seconds, 1)}
        lines = list(result.lines) or ["no error text"]
        if not result.retry_here:
            finding = _twin_failed(lines, result.hint, {"stage": result.stage, "where": "child"})
            return [finding], {"where": "a child process, beside the release compile", "child_s": round(result.seconds, 1)}
        st.twin_not_in_child = (
            f"its child could not {'compile' if result.stage == 'compile' else 'load'} the saved program: {lines[0][:300]}"
        )
    said: list[Finding] = []
    if st.twin_not_in_child is not None:  # the concurrent schedule was meant, and could not be had: said, not silent
        st.note(f"the debug twin compiles here, after the release model ({st.twin_not_in_child})")
        detail["not_in_child"] = st.twin_not_in_child
        said.append(_compiled_after(st.twin_not_in_child))
    try:
        package_mod.package_release(twin_path(st), compile_mod.compile_files(st.ep, twin_configs(st)), layout.TWIN_MODEL)
    except compile_mod.CompileError as exc:
        return [*said, _twin_failed(exc.lines, None, {})], detail
    st.twin_pt2 = twin_path(st)
    return said, detail


def _compiled_after(why: str) -> Finding:
    return info(
        "build.twin_compiled_after",
        "debug_twin",
        f"the debug twin was compiled here after the release model, not in a child beside it: {why}",
        expected="the twin compiled in a child, beside the release compile",
        found="compiled after it, in the build's own process (the build took longer by the twin's compile)",
        hint="the twin is the same either way; the child imports the TARGET's module for user ops (torch.library), so a "
        "program saved by torch.export.save with ops no module of yours registers is a cause; --twin-schedule after asks for "
        "this order outright",
    )


def _twin_failed(lines: list[str], hint: str | None, evidence: dict[str, Any]) -> Finding:
    exhausted = resources.from_text("\n".join(lines))
    if exhausted is not None:  # the release package is still valid: a warning, as for any twin failure
        return resources.finding(
            exhausted, "debug_twin", "compiling the debug twin", severity=Severity.WARNING, evidence={"lines": lines, **evidence}
        )
    return warning(
        "build.twin_failed",
        "debug_twin",
        f"the debug twin did not compile: {(lines or ['no error text'])[0][:300]}",
        hint=hint or "the release package is still built; the probe cannot escalate to a twin",
        evidence={"lines": lines, **evidence},
    )
