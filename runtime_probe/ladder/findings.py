"""What the ladder's instruments say, as findings: pure functions over captured text, so the
ladder's logic is unit-tested on CPU with output recorded on the GPU machine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime_probe.findings import Finding, error, info, warning
from runtime_probe.ladder import readers as _diagnose

__all__ = ["durable_fix", "native_findings", "tail", "twin_findings"]

PHASE = "escalate"


def tail(text: str, lines: int = 12) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("frame #")][-lines:]


def twin_findings(
    stdout: str, stderr: str, *, replay_kind: str, device_type: str, crash_signal: str | None
) -> tuple[list[Finding], dict[str, Any]]:
    """What the debug twin's run says: the kernel that was running at a fault, or the first kernel
    after which a NaN/Inf appeared. Pure: unit-tested on output recorded on the GPU machine."""
    trace = _diagnose.kernel_trace(stdout)
    nan = _diagnose.nan_buffer(stderr)
    cuda = _diagnose.cuda_error(stdout + "\n" + stderr)
    evidence: dict[str, Any] = {
        "launched": list(trace.launched[-20:]),
        "running": trace.unfinished,
        "last_finished": trace.last_finished,
        "nan": list(nan) if nan else None,
        "native": tail(stderr),
    }
    findings: list[Finding] = []
    if nan is not None:
        kernel = trace.last_finished or trace.unfinished
        findings.append(
            error(
                "run.nonfinite",
                PHASE,
                f"the first {nan[0]} appears in {nan[1]}, written by kernel {kernel}",
                found=f"{nan[0]} in {nan[1]}",
                hint=f"inspect {kernel} in the package's generated code (aoti-guard inspect) and the inputs that reach it; the kernels before it produced finite values",
                evidence={"kernel": kernel, "buffer": nan[1], "launched": list(trace.launched[-10:])},
            )
        )
    elif cuda is not None and cuda[0] in ("run.illegal_memory_access", "run.device_assert"):
        kernel = trace.unfinished or (trace.launched[-1] if trace.launched else None)
        what = "illegal memory access" if cuda[0] == "run.illegal_memory_access" else "device-side assertion"
        findings.append(
            error(
                cuda[0],
                PHASE,
                f"{what} in kernel {kernel}",
                found=cuda[1],
                hint=f"{kernel} reads or writes out of bounds for these inputs: check the index or size arguments that reach it",
                evidence={"kernel": kernel, "line": cuda[1], "launched": list(trace.launched[-10:])},
            )
        )
    elif replay_kind == "nonfinite" and device_type == "cpu" and trace.launched:
        findings.append(
            info(
                "run.nonfinite",
                PHASE,
                f"on CPU the twin's NaN asserts check graph inputs only, so no kernel is named; the kernels that ran, in order: {', '.join(trace.launched)}",
                hint="the first of these whose math can produce NaN/Inf from finite inputs (sqrt, log, division) is the likely source",
                evidence={"launched": list(trace.launched)},
            )
        )
    elif crash_signal and trace.unfinished:
        findings.append(
            error(
                "run.crash",
                PHASE,
                f"the process died ({crash_signal}) while kernel {trace.unfinished} was running",
                found=crash_signal,
                hint=f"look at {trace.unfinished} first",
                evidence={"kernel": trace.unfinished},
            )
        )
    return findings, evidence


def durable_fix(built_with: str | None, process_libstdcxx: str | None, glibcxx: str | None) -> str:
    """The fix that needs no LD_PRELOAD, naming the compiler and the C++ runtime on each side."""
    compiler = built_with or "the build compiler"
    runtime = process_libstdcxx or "the serving process's libstdc++"
    needs = f" (the .so needs {glibcxx})" if glibcxx else ""
    return (
        f"rebuild the package with a compiler whose libstdc++ is the one the serving process loads ({runtime}), "
        f"instead of {compiler}{needs}; or ship that compiler's libstdc++ with the serving image and load it first"
    )


def native_findings(
    backtrace: str, *, stage: str, so: Mapping[str, Any], process_libstdcxx: str | None, built_with: str | None, unloaded_constants: int
) -> tuple[list[Finding], dict[str, Any]]:
    """A debugger's backtrace, classified into a cause. Pure: unit-tested on recorded output."""
    frames = _diagnose.parse_backtrace(backtrace)
    cause, explanation, frame = _diagnose.classify_frames(frames)
    if cause == "unknown" and unloaded_constants:
        cause, explanation = "weights", "the package carries no weights and none were loaded: the model read constants that were never set"
    evidence: dict[str, Any] = {
        "signal": frames.signal,
        "frames": list(frames.frames[:25]),
        "cause": cause,
        "deciding_frame": frame,
        "so": dict(so),
        "process_libstdcxx": process_libstdcxx,
    }
    if not frames.frames:
        return [], evidence
    if cause == "cxx_runtime":
        static = bool(so) and not so.get("links_libstdcxx")
        detail = " (the .so carries its own static copy of libstdc++: it links no libstdc++.so.6)" if static else ""
        finding = error(
            "env.cxx_runtime_mismatch",
            PHASE,
            f"the crash is in the C++ standard library inside the package's .so{detail}: {explanation}",
            expected=f"the C++ runtime of the build compiler ({built_with})" if built_with else None,
            found=f"this process's {process_libstdcxx}",
            hint="see the remedy step: preloading one C++ runtime for the whole process usually fixes it; durable fix: "
            + durable_fix(built_with, process_libstdcxx, so.get("glibcxx")),
            evidence=evidence,
        )
    elif cause == "weights" and unloaded_constants:
        finding = error(
            "constants.missing",
            PHASE,
            f"the crash is in the model's constants: {explanation}",
            expected=f"{unloaded_constants} runtime constant(s) loaded",
            found="none loaded",
            hint="pass --weights FILE.safetensors (the probe validates it before load_constants)",
            evidence=evidence,
        )
    elif cause == "kernel_image":
        finding = error(
            "env.arch_mismatch",
            PHASE,
            f"the crash is in loading a GPU kernel image: {explanation}",
            found=frame,
            hint="rebuild the package on the deployment GPU's arch",
            evidence=evidence,
        )
    else:
        finding = warning(
            f"{stage}.native_frames",
            PHASE,
            f"native frames of the crash: {explanation}",
            found=frame or frames.frames[0],
            hint="the innermost frames are in evidence.frames",
            evidence=evidence,
        )
    return [finding], evidence
