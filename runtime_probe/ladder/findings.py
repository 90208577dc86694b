"""What the ladder's instruments say, as findings: pure functions over captured text, so the
ladder's logic is unit-tested on CPU with output recorded on the GPU machine."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime_probe.child.messages import cuda_error
from runtime_probe.ladder import printer as _printer
from runtime_probe.ladder import readers as _diagnose
from runtime_probe.reporting.findings import Finding, error, info, warning

__all__ = ["TwinContext", "durable_fix", "native_findings", "tail", "twin_findings"]

PHASE = "escalate"


def tail(text: str, lines: int = 12) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("frame #")][-lines:]


@dataclass(frozen=True)
class TwinContext:
    """What the probe knows beside the twin's output: the build's non-finite ``baseline`` (buffer
    -> the kinds its golden samples held there), ``input_name`` (a graph input's position -> the
    contract's name) and ``sample`` (names the failing inputs in messages)."""

    baseline: Mapping[str, Sequence[str]] | None = None
    input_name: Callable[[int], str] | None = None
    sample: str | None = None


def twin_findings(
    stdout: str,
    stderr: str,
    *,
    replay_kind: str,
    device_type: str,
    crash_signal: str | None,
    context: TwinContext | None = None,
) -> tuple[list[Finding], dict[str, Any]]:
    """What the debug twin's run says: the first value the build's non-finite baseline does
    not explain (a NaN, or an Inf where the golden samples had none) and the kernel that wrote it,
    read off the level-2 printer (ladder/printer.py); or, for a twin built with NaN asserts, the
    buffer the assert stopped at; or the kernel that was running at a fault (``context``: see
    ``TwinContext``). Pure: unit-tested on recorded output."""
    ctx = context or TwinContext()
    out = _TwinOutput.read(stdout, stderr, ctx)
    on = f" on {ctx.sample}" if ctx.sample else ""
    evidence: dict[str, Any] = {
        "launched": list(out.trace.launched[-20:]),
        "running": out.trace.unfinished,
        "last_finished": out.trace.last_finished,
        "nan": list(out.nan) if out.nan else None,
        "printed_values": len(out.prints),
        "departure": _departure_dict(out.departure, ctx.input_name) if out.departure else None,
        "baseline": {k: list(v) for k, v in out.allowed.items()},
        "native": tail(stderr),
    }
    if out.departure is not None:
        inputs = {p.name: p.input_index for p in out.prints if p.input_index is not None}
        return [_departure_finding(out.departure, out.allowed, inputs, ctx.input_name, on, out.trace)], evidence
    finding = _assert_finding(out, on) or _fault_finding(out, replay_kind, device_type, crash_signal)
    return ([finding] if finding is not None else []), evidence


def _departure_dict(d: _printer.Departure, input_name: Callable[[int], str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": d.name, "kernel": d.kernel, "kinds": list(d.kinds), "baseline": list(d.expected)}
    if d.input_index is not None:
        out["input"] = input_name(d.input_index) if input_name else f"input {d.input_index}"
    return out


def _departure_finding(
    d: _printer.Departure,
    allowed: Mapping[str, Sequence[str]],
    inputs: Mapping[str, int],
    input_name: Callable[[int], str] | None,
    on: str,
    trace: Any,
) -> Finding:
    def label(name: str) -> str:  # a graph input by the contract's name too: "mask (arg7_1)"
        return f"{input_name(inputs[name])} ({name})" if name in inputs and input_name else name

    intended = ", ".join(f"{label(name)} ({'/'.join(kinds)})" for name, kinds in list(allowed.items())[:6])
    more = f" and {len(allowed) - 6} more" if len(allowed) > 6 else ""
    past = (
        f"; past the non-finite values the build's golden samples also held (its baseline, with outputs that matched eager): {intended}{more}"
        if intended
        else ""
    )
    expected = f"{d.name} holding {'/'.join(d.expected)} at most (the build's baseline)" if d.expected else f"{d.name} finite"
    detail = _departure_dict(d, input_name)
    if d.kernel is None:
        what = detail["input"]
        return error(
            "run.nonfinite",
            PHASE,
            f"the input {what} ({d.name}) holds {d.kind} on entry{on}, before any kernel ran{past}",
            expected=expected,
            found=f"{d.kind} in {what}",
            hint=f"the caller passes {d.kind} in {what}; the kernels are not its cause",
            evidence={"buffer": d.name, "argument": what, "kinds": list(d.kinds), "launched": list(trace.launched[-10:])},
        )
    return error(
        "run.nonfinite",
        PHASE,
        f"the first {d.kind} appears{on} in {d.name}, written by kernel {d.kernel}{past}",
        expected=expected,
        found=f"{d.kind} in {d.name}",
        hint=f"inspect {d.kernel} in the package's generated code (aoti-guard inspect) and the inputs that reach it; "
        "every value written before it is finite or in the baseline",
        evidence={"kernel": d.kernel, "buffer": d.name, "kinds": list(d.kinds), "launched": list(trace.launched[-10:])},
    )


@dataclass(frozen=True)
class _TwinOutput:
    """The twin's output, read by each instrument: the kernel trace, the printed values and their
    first departure from the baseline, the NaN assert's buffer, a CUDA error line."""

    trace: _diagnose.KernelTrace
    prints: list[_printer.Print]
    allowed: Mapping[str, Sequence[str]]
    departure: _printer.Departure | None
    nan: tuple[str, str] | None
    cuda: tuple[str, str] | None

    @classmethod
    def read(cls, stdout: str, stderr: str, ctx: TwinContext) -> _TwinOutput:
        prints = _printer.parse_prints(stdout)
        allowed = ctx.baseline or {}
        return cls(
            trace=_diagnose.kernel_trace(stdout),
            prints=list(prints),
            allowed=allowed,
            departure=_printer.first_departure(prints, allowed) if prints else None,
            nan=_diagnose.nan_buffer(stderr),
            cuda=cuda_error(stdout + "\n" + stderr),
        )


def _assert_finding(out: _TwinOutput, on: str) -> Finding | None:
    """The buffer a twin built with NaN asserts stopped at (None: no assert fired)."""
    trace, nan = out.trace, out.nan
    if nan is None:
        return None
    if nan[0] == "Inf":
        # A twin built with NaN asserts (before issue 26) stops at the first Inf, which a masked
        # attention holds by design: where it stopped is no cause, and it saw nothing after it.
        return warning(
            "run.nonfinite",
            PHASE,
            f"the debug twin's NaN/Inf assert stopped{on} at the first Inf, in {nan[1]}: an Inf there may be intended "
            "(an additive -inf attention mask), and the twin saw nothing after it",
            expected="a NaN, or an Inf the build's golden samples did not hold",
            found=f"Inf in {nan[1]}",
            hint="rebuild the package with this aoti-guard: its twin prints every kernel's values without stopping, "
            "and the escalation names the first NaN past an intended Inf",
            evidence={"buffer": nan[1], "launched": list(trace.launched[-10:])},
        )
    kernel = trace.last_finished or trace.unfinished
    return error(
        "run.nonfinite",
        PHASE,
        f"the first {nan[0]} appears{on} in {nan[1]}, written by kernel {kernel}",
        found=f"{nan[0]} in {nan[1]}",
        hint=f"inspect {kernel} in the package's generated code (aoti-guard inspect) and the inputs that reach it; the kernels before it produced finite values",
        evidence={"kernel": kernel, "buffer": nan[1], "launched": list(trace.launched[-10:])},
    )


def _fault_finding(out: _TwinOutput, replay_kind: str, device_type: str, crash_signal: str | None) -> Finding | None:
    """The kernel a CUDA fault or a crash names, or the CPU run's kernel order (None: nothing)."""
    trace, cuda = out.trace, out.cuda
    if cuda is not None and cuda[0] in ("run.illegal_memory_access", "run.device_assert"):
        kernel = trace.unfinished or (trace.launched[-1] if trace.launched else None)
        what = "illegal memory access" if cuda[0] == "run.illegal_memory_access" else "device-side assertion"
        return error(
            cuda[0],
            PHASE,
            f"{what} in kernel {kernel}",
            found=cuda[1],
            hint=f"{kernel} reads or writes out of bounds for these inputs: check the index or size arguments that reach it",
            evidence={"kernel": kernel, "line": cuda[1], "launched": list(trace.launched[-10:])},
        )
    if replay_kind == "nonfinite" and device_type == "cpu" and trace.launched and not out.prints:
        return info(
            "run.nonfinite",
            PHASE,
            f"on CPU the twin's NaN asserts check graph inputs only, so no kernel is named; the kernels that ran, in order: {', '.join(trace.launched)}",
            hint="the first of these whose math can produce NaN/Inf from finite inputs (sqrt, log, division) is the likely source",
            evidence={"launched": list(trace.launched)},
        )
    if crash_signal and trace.unfinished:
        return error(
            "run.crash",
            PHASE,
            f"the process died ({crash_signal}) while kernel {trace.unfinished} was running",
            found=crash_signal,
            hint=f"look at {trace.unfinished} first",
            evidence={"kernel": trace.unfinished},
        )
    return None


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
