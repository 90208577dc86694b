"""A build that ran out of a resource says which, never blames the compiler or the model.

A file-size limit (``ulimit -f``: SIGXFSZ, or errno EFBIG "File too large" where the signal is
ignored, as Python does), a full disk or quota (ENOSPC, EDQUOT), memory (MemoryError, ENOMEM,
``std::bad_alloc``, cc1plus's "out of memory"), or a process killed with SIGKILL (what the kernel's
OOM killer sends; nothing establishes it was that) stop any phase: export, the C++ compile and
link, the validation child, the package write. Each reads differently: an exception with an errno,
a C++ compiler's line ("g++: internal compiler error: File size limit exceeded signal terminated
program cc1plus"), a child's signal. ``from_exception``, ``from_text``, ``from_signal`` and
``from_child`` read them; ``finding`` makes the ``build.resource_exhausted`` finding (exit 3: the
machine, not the model, stopped the build), and ``guarded`` turns such an exception escaping any
build step into one.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runtime_probe.reporting.findings import Finding, Severity
from runtime_probe.reporting.recorder import StepFailed, StepResult

__all__ = ["Exhausted", "finding", "from_child", "from_exception", "from_signal", "from_text", "guarded"]

CODE = "build.resource_exhausted"


@dataclass(frozen=True)
class Exhausted:
    """What ran out (``what``), how it showed (``found``: an errno, a signal or a line), what to do."""

    kind: str  # "file_size" | "disk" | "memory" | "gpu_memory" | "killed"
    what: str  # a clause: "a file reached the file-size limit (ulimit -f)"
    found: str
    hint: str
    evidence: Mapping[str, Any] = field(default_factory=dict)


_FILE_SIZE_HINT = (
    "raise the file-size limit (ulimit -f unlimited, or the container's or batch system's limit) or build where there is none: "
    "the build writes the compiled .so, Inductor's cache, the golden samples and the package, each possibly larger than the "
    "final package (--golden-max-mb caps the golden samples)"
)
_DISK_HINT = (
    "free disk space where the build writes: the output's folder (the build's work folder is made beside -o), TMPDIR, and "
    "Inductor's cache (TORCHINDUCTOR_CACHE_DIR); a full-size build needs several times its package's size "
    "(--golden-max-mb caps the golden samples)"
)
_MEMORY_HINT = (
    "free memory or raise the limit (ulimit -v, the container's memory limit): the C++ compile of a large model, the debug twin "
    "compiling beside the release model (--twin-schedule after, or --no-debug-twin) and the float64 reference (--no-fp64) "
    "each take memory"
)
_GPU_MEMORY_HINT = "free the GPU (nvidia-smi lists what holds it) or lower the dynamic dimensions' maximum"
_KILLED_HINT = (
    "nothing in the build sends SIGKILL: the kernel's OOM killer does when memory runs out (dmesg says so), as do a container's "
    "memory limit and an operator; if it was memory, see --twin-schedule after, --no-debug-twin and --no-fp64"
)

_FILE_SIZE = "a file reached the file-size limit (ulimit -f)"
_MEMORY = "memory ran out"
_KILLED = "a process was killed with SIGKILL, the signal of the kernel's OOM killer (not established: see the hint)"

_ERRNO: dict[int, tuple[str, str, str]] = {
    errno.EFBIG: ("file_size", _FILE_SIZE, _FILE_SIZE_HINT),
    errno.ENOSPC: ("disk", "the disk is full", _DISK_HINT),
    errno.EDQUOT: ("disk", "the disk quota is used up", _DISK_HINT),
    errno.ENOMEM: ("memory", _MEMORY, _MEMORY_HINT),
}

# (kind, what, hint, pattern): the first row that matches a line decides; most specific first.
_TEXT: tuple[tuple[str, str, str, re.Pattern[str]], ...] = (
    ("file_size", _FILE_SIZE, _FILE_SIZE_HINT, re.compile(r"File size limit exceeded|SIGXFSZ|\[Errno 27\]|File too large", re.I)),
    ("disk", "the disk is full", _DISK_HINT, re.compile(r"No space left on device|\[Errno 28\]")),
    ("disk", "the disk quota is used up", _DISK_HINT, re.compile(r"Disk quota exceeded|\[Errno 122\]")),
    (
        "gpu_memory",
        "the GPU's memory ran out",
        _GPU_MEMORY_HINT,
        re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory|HIP out of memory"),
    ),
    (
        "memory",
        _MEMORY,
        _MEMORY_HINT,
        re.compile(
            r"\bMemoryError\b|std::bad_alloc|Cannot allocate memory|can't allocate memory|virtual memory exhausted|"
            r"\[Errno 12\]|out of memory allocating|cc1plus: out of memory",
            re.I,
        ),
    ),
    # g++'s words when cc1plus (or ld) is SIGKILLed: "Killed signal terminated program cc1plus"
    ("killed", _KILLED, _KILLED_HINT, re.compile(r"Killed signal terminated program|signal 9 \[Killed\]")),
)


def from_errno(code: int | None, detail: str = "", filename: str | None = None) -> Exhausted | None:
    """An OSError's errno that means a resource ran out."""
    if code not in _ERRNO:
        return None
    assert code is not None
    kind, what, hint = _ERRNO[code]
    name = errno.errorcode.get(code, str(code))
    evidence: dict[str, Any] = {"errno": name}
    if filename:
        evidence["file"] = filename
    if kind == "file_size":
        evidence.update(_fsize_limit())
    return Exhausted(kind, what, f"{name} ({detail or _strerror(code)})" + (f" writing {filename}" if filename else ""), hint, evidence)


def _strerror(code: int) -> str:
    import os

    return os.strerror(code)


def _fsize_limit() -> dict[str, Any]:
    """This process's file-size limit (children inherit it), as evidence of the cause."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    except (ImportError, OSError, ValueError):
        return {}
    return {"rlimit_fsize_bytes": None if soft == resource.RLIM_INFINITY else soft}


def from_text(text: str) -> Exhausted | None:
    """The first line of ``text`` (an error message, a compiler's output, a child's stderr) that
    says a resource ran out."""
    for line in text.splitlines():
        for kind, what, hint, pattern in _TEXT:
            if pattern.search(line):
                evidence: dict[str, Any] = {"line": line.strip()[:500]}
                if kind == "file_size":
                    evidence.update(_fsize_limit())
                return Exhausted(kind, what, line.strip()[:300], hint, evidence)
    return None


def from_signal(signal: str | None) -> Exhausted | None:
    """A process ended by a signal that means a resource ran out: SIGXFSZ (the file-size limit),
    SIGKILL (what the OOM killer sends: said as likely, not as established)."""
    if signal == "SIGXFSZ":
        return Exhausted("file_size", _FILE_SIZE, "SIGXFSZ", _FILE_SIZE_HINT, {"signal": signal, **_fsize_limit()})
    if signal == "SIGKILL":
        return Exhausted("killed", _KILLED, "SIGKILL", _KILLED_HINT, {"signal": signal})
    return None


def from_exception(exc: BaseException) -> Exhausted | None:
    """An exception (or one it was raised from) that says a resource ran out: an OSError's errno,
    MemoryError, or such words in its message (Inductor wraps the compiler's output in its own)."""
    seen: set[int] = set()
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < 16:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    for e in chain:
        if isinstance(e, OSError):
            found = from_errno(e.errno, e.strerror or "", e.filename if isinstance(e.filename, str) else None)
            if found is not None:
                return found
        if isinstance(e, MemoryError):
            return Exhausted("memory", _MEMORY, f"MemoryError: {str(e)[:200]}".rstrip(": "), _MEMORY_HINT, {"exception": "MemoryError"})
    for e in chain:
        found = from_text(f"{type(e).__name__}: {e}")
        if found is not None:
            return found
    return None


def from_child(exc: Any) -> Exhausted | None:
    """A ``runtime_probe.child.worker`` failure that says a resource ran out: the child's signal,
    or its exception and stderr."""
    from runtime_probe.child.worker import ChildCrashed, ChildRaised

    if isinstance(exc, ChildCrashed):
        return from_signal(exc.signal)
    if isinstance(exc, ChildRaised):
        if exc.error_type == "MemoryError":
            return Exhausted(
                "memory", _MEMORY, f"MemoryError: {exc.message[:200]}".rstrip(": "), _MEMORY_HINT, {"exception": "MemoryError"}
            )
        return from_text(f"{exc.error_type}: {exc.message}\n{exc.stderr[-4000:]}")
    return None


def finding(
    ex: Exhausted, phase: str, doing: str, *, severity: Severity = Severity.ERROR, evidence: Mapping[str, Any] | None = None
) -> Finding:
    """The ``build.resource_exhausted`` finding: ``doing`` ("compiling Net") stopped because ``ex.what``."""
    return Finding(
        CODE,
        severity,
        phase,
        f"{doing} stopped: {ex.what}; the machine's limit, not the model or the compiler",
        found=ex.found,
        hint=ex.hint,
        evidence={"resource": ex.kind, **ex.evidence, **(evidence or {})},
    )


State = TypeVar("State")


def guarded(steps: Sequence[tuple[str, Callable[[State], StepResult]]]) -> tuple[tuple[str, Callable[[State], StepResult]], ...]:
    """``steps`` with an OSError or MemoryError that means a resource ran out, escaping a step,
    turned into that step's ``build.resource_exhausted`` finding (any other exception passes)."""

    def wrap(name: str, step: Callable[[State], StepResult]) -> Callable[[State], StepResult]:
        def run(state: State) -> StepResult:
            try:
                return step(state)
            except (OSError, MemoryError) as exc:
                ex = from_exception(exc)
                if ex is None:
                    raise
                raise StepFailed([finding(ex, name, f"the {name} phase", evidence=_where(exc))], ex.what) from exc

        return run

    return tuple((name, wrap(name, step)) for name, step in steps)


def _where(exc: BaseException) -> dict[str, Any]:
    """The innermost frame the exception passed: which write ran out."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return {"at": f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}"} if frames else {}
