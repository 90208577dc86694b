"""ONE table: a child's failure (crash, timeout, raised exception) -> the finding that reports it.

Both pipelines load and run the package in a child (``child.worker``) and report its failures the
same way: the probe's phases (``probe.phases``) and the build's validation
(``aoti_guard.builder.validate``). They differ only in what they know, given as a ``Reporter``:
the report phase, the manifest (to name an input AOTI's own check rejected), whether weights were
passed, and what the reader should do next about a crash.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime_probe.child.messages import cuda_error, input_check
from runtime_probe.child.worker import ChildCrashed, ChildFailure, ChildRaised, ChildTimeout
from runtime_probe.package.manifest import Manifest
from runtime_probe.reporting.findings import Finding, error
from runtime_probe.runtime.user_modules import IMPORT_FAILED, missing_op

__all__ = ["Reporter", "failure_finding", "no_weights", "torch_import_finding"]


@dataclass(frozen=True)
class Reporter:
    """Who reports a child's failure, and what it knows."""

    phase: str  # the report phase the finding goes in
    manifest: Manifest | None = None
    weights_given: bool = False
    next_step: str = "the escalate phase reruns it with more instruments"
    # how this tool makes a child import the module that registers a package's user ops
    import_remedy: str = "pass --import MODULE_OR_FILE (the Python file or module that defines the op with torch.library): each child imports it before the load"
    stderr_chars: int = 6000
    stdout_chars: int = 3000


def no_weights(manifest: Manifest | None, weights_given: bool) -> bool:
    """The package carries no weights (package_constants_in_so=False) and none were given."""
    return manifest is not None and manifest.inductor_configs.get("aot_inductor.package_constants_in_so") == "False" and not weights_given


@dataclass(frozen=True)
class _Row:
    kind: type[ChildFailure]
    when: Callable[[ChildFailure, Reporter], bool]
    suffix: str  # the finding code is "<stage>.<suffix>"
    hint: str  # formatted with the Reporter's fields


def _always(exc: ChildFailure, rep: Reporter) -> bool:
    return True


def _killed(exc: ChildFailure, rep: Reporter) -> bool:
    # Nothing in the child sends itself SIGKILL: the kernel's OOM killer (or a container's memory
    # limit, or an operator) did.
    return isinstance(exc, ChildCrashed) and exc.signal == "SIGKILL"


def _weightless(exc: ChildFailure, rep: Reporter) -> bool:
    return no_weights(rep.manifest, rep.weights_given)


def _raised_text(exc: ChildFailure) -> str:
    """What a child that raised said: its exception, then the end of its stderr."""
    assert isinstance(exc, ChildRaised)
    return f"{exc.error_type}: {exc.message}\n{exc.stderr[-4000:]}"


def _raised_matching(pattern: re.Pattern[str]) -> Callable[[ChildFailure, Reporter], bool]:
    """A row's condition: the child raised, and its text matches ``pattern``."""

    def when(exc: ChildFailure, rep: Reporter) -> bool:
        return isinstance(exc, ChildRaised) and bool(pattern.search(_raised_text(exc)))

    return when


_disk_full = _raised_matching(re.compile(r"No space left on device|Disk quota exceeded|\[Errno (?:28|122)\]"))
_gpu_out_of_memory = _raised_matching(re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|HIP out of memory"))
_out_of_memory = _raised_matching(
    re.compile(r"MemoryError|std::bad_alloc|can't allocate memory|Cannot allocate memory|out of memory", re.I)
)


def _import_failed(exc: ChildFailure, rep: Reporter) -> bool:
    return isinstance(exc, ChildRaised) and IMPORT_FAILED in _raised_text(exc)


def _missing_op(exc: ChildFailure, rep: Reporter) -> bool:
    return isinstance(exc, ChildRaised) and missing_op(_raised_text(exc)) is not None


_CUDA_TEXT = re.compile(r"CUDA error|cudaError|device-side assert|Assertion .{0,300} failed")


def _cuda_fault(exc: ChildFailure, rep: Reporter) -> bool:
    # Only with CUDA's own words: a CPU IndexError ("... is out of bounds ...") stays run.error.
    if not isinstance(exc, ChildRaised):
        return False
    text = exc.stderr + "\n" + exc.message
    return bool(_CUDA_TEXT.search(text)) and cuda_error(text) is not None


def _rejected_input(exc: ChildFailure, rep: Reporter) -> bool:
    return rep.manifest is not None and input_check(exc.stderr) is not None


# The first row whose kind and condition match decides the code and the hint.
TABLE: tuple[_Row, ...] = (
    _Row(
        ChildCrashed,
        _killed,
        "crash",
        "the child was killed from outside, most often by the kernel's OOM killer: check dmesg or the container's memory limit, and the constants' size",
    ),
    _Row(
        ChildCrashed,
        _weightless,
        "crash",
        "this package carries no weights (built with package_constants_in_so=False): pass --weights FILE.safetensors",
    ),
    _Row(ChildCrashed, _always, "crash", "the native code crashed: {next_step}"),
    _Row(ChildTimeout, _always, "timeout", "raise --timeout, or look for a hang (a deadlock, a GPU that does not answer)"),
    _Row(ChildRaised, _rejected_input, "input", "the inputs break the compiled contract"),
    # a user op (torch.library) the child never registered: the package needs its module imported first
    _Row(ChildRaised, _missing_op, "missing_op", "{import_remedy}"),
    # a module the user named to register those ops (--import, the build's TARGET) did not import
    _Row(
        ChildRaised,
        _import_failed,
        "import_failed",
        "check the module given: --import takes a .py file or an importable module name (the build imports its TARGET's itself)",
    ),
    # a device assert or an illegal access: the run's code names it (the CUDA context is lost)
    _Row(
        ChildRaised,
        _cuda_fault,
        "cuda",
        "the escalate phase reruns it with blocking launches, the twin and the sanitizer to name the kernel",
    ),
    _Row(
        ChildRaised,
        _disk_full,
        "error",
        "the disk is full: the package is extracted under TMPDIR to load it; free space there (or point TMPDIR at a larger disk)",
    ),
    _Row(
        ChildRaised,
        _gpu_out_of_memory,
        "error",
        "the GPU ran out of memory: other processes may hold it (nvidia-smi lists them), or this input needs more than the GPU "
        "has: free the GPU, or lower the dynamic dimensions' maximum",
    ),
    _Row(
        ChildRaised,
        _out_of_memory,
        "error",
        "the child ran out of memory (an allocation failed): check the process's memory limit (ulimit -v, the container's limit) and the constants' size",
    ),
    _Row(ChildRaised, _always, "error", "the native error is in evidence.stderr_tail"),
)


def _row(exc: ChildFailure, rep: Reporter) -> _Row:
    return next(r for r in TABLE if isinstance(exc, r.kind) and r.when(exc, rep))


def failure_finding(exc: ChildFailure, what: str, stage: str, rep: Reporter) -> Finding:
    """The finding for ``exc``, raised while doing ``what`` (e.g. "loading the package") at
    ``stage`` ("load" or "run": the code's prefix)."""
    evidence: dict[str, Any] = {
        "stderr_tail": exc.stderr[-rep.stderr_chars :],
        "stdout_tail": exc.stdout[-rep.stdout_chars :],
        **exc.evidence,
    }
    row = _row(exc, rep)
    hint = row.hint.format(next_step=rep.next_step, import_remedy=rep.import_remedy)
    if isinstance(exc, ChildCrashed):
        sig = exc.signal or f"exit code {exc.returncode}"
        native = exc.evidence.get("native") or []
        message = f"{what}: the child process died ({sig})" + (f"; last native output: {native[-1][:300]}" if native else "")
        return error(f"{stage}.crash", rep.phase, message, found=sig, hint=hint, evidence=evidence)
    if isinstance(exc, ChildTimeout):
        message = f"{what}: no answer within {exc.seconds:.0f}s; the child and its children were killed"
        return error(f"{stage}.timeout", rep.phase, message, hint=hint, evidence=evidence)
    assert isinstance(exc, ChildRaised)
    evidence["traceback"] = str(exc.evidence.get("traceback", ""))[-4000:]
    check = input_check(exc.stderr)
    if row.suffix == "input" and check is not None and rep.manifest is not None:
        name = rep.manifest.io.tensor_input_name(check.index)
        return error(
            check.code,
            rep.phase,
            f"{name}: {what} was rejected by AOTI's input check: {check.line}",
            found=check.line,
            hint=hint,
            evidence={**evidence, "argument": name},
        )
    if row.suffix == "missing_op":
        return _missing_op_finding(exc, what, stage, rep, evidence)
    if row.suffix == "import_failed":
        line = next((ln for ln in _raised_text(exc).splitlines() if IMPORT_FAILED in ln), exc.message)
        return error(f"{stage}.import_failed", rep.phase, f"{what}: {line[:500]}", hint=hint, evidence=evidence)
    cuda = cuda_error(exc.stderr + "\n" + exc.message) if row.suffix == "cuda" else None
    if cuda is not None and stage == "run":
        return error(cuda[0], rep.phase, f"{what}: {cuda[1][:500]}", found=cuda[1][:500], hint=hint, evidence=evidence)
    native = [line for line in exc.stderr.splitlines() if line.startswith("Error:") or "error" in line.lower()]
    detail = native[-1] if native else f"{exc.error_type}: {exc.message.splitlines()[0] if exc.message else ''}"
    return error(f"{stage}.error", rep.phase, f"{what} raised: {detail[:500]}", hint=hint, evidence=evidence)


def _missing_op_finding(exc: ChildRaised, what: str, stage: str, rep: Reporter, evidence: dict[str, Any]) -> Finding:
    """A user op the child has not registered: named, with the package's list of them and the remedy."""
    op = missing_op(_raised_text(exc)) or "?"
    code = rep.manifest.user_code if rep.manifest is not None else None
    ops = list(code.custom_ops) if code is not None and code.custom_ops else [op]
    return error(
        f"{stage}.missing_op",
        rep.phase,
        f"{what}: the package calls the custom op {op}, which this Python process has not registered "
        "(it exists only where the module that defines it with torch.library was imported)",
        expected=f"custom op(s) registered before the load: {', '.join(ops)} (the package's manifest, user_code.custom_ops)",
        found=f"torch: Could not find schema for {op}",
        hint=rep.import_remedy,
        evidence={**evidence, "op": op, "custom_ops": ops},
    )


def torch_import_finding(exc: ChildFailure, phase: str) -> Finding:
    """The finding for a child that failed its first request (import torch, read the host's
    facts), before the package was opened: the environment's doing, never the package's."""
    if isinstance(exc, ChildTimeout):
        how = f"did not answer within {exc.seconds:.0f}s (it was killed)"
    elif isinstance(exc, ChildCrashed):
        how = f"died ({exc.signal})" if exc.signal else f"exited with code {exc.returncode}"
    else:
        how = f"raised {exc}"
    native = [line for line in exc.evidence.get("native") or [] if line.strip()]
    return error(
        "env.torch_broken",
        phase,
        f"a fresh Python child {how} while importing torch, before the package was opened"
        + (f"; last output: {native[-1][:300]}" if native else ""),
        expected="import torch succeeds in a fresh interpreter",
        found=exc.signal if isinstance(exc, ChildCrashed) and exc.signal else how,
        hint="check this environment's torch outside the probe (python -P -c 'import torch'), and any sitecustomize "
        "or PYTHONPATH entry that runs at start-up; then rerun",
        evidence={"stderr_tail": exc.stderr[-6000:], "stdout_tail": exc.stdout[-3000:], **exc.evidence},
    )
