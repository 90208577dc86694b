"""A resource that ran out is named as such (aoti_guard/builder/resources.py), never as a compiler
or model problem. The texts are what the tools printed (recorded on this CPU host under
``ulimit -f``: g++ 11's cc1plus and as), or the wording of their sources where noted; the real
builds under ``ulimit -f`` are in tests/integration/test_resource_limits.py."""

from __future__ import annotations

import errno
import signal

import pytest

from aoti_guard.builder import resources
from aoti_guard.builder.compile.aoti import describe_compile_error
from runtime_probe.child.worker import ChildCrashed, ChildRaised
from runtime_probe.reporting.findings import Severity
from runtime_probe.reporting.recorder import StepFailed
from runtime_probe.reporting.report import Report, make_phase

# recorded: AOTI's compile of a 16x16 Linear under ``ulimit -f 2000`` (cc1plus), and of a
# 2048x2048 Linear under ``ulimit -f 8000`` (the assembler, writing the weights' object)
CC1PLUS = "g++: internal compiler error: File size limit exceeded signal terminated program cc1plus"
ASSEMBLER = "g++: internal compiler error: File size limit exceeded signal terminated program as"


class CppCompileError(Exception):
    """Inductor's exception's name and text: the pipeline reads it by name (torch is not imported here)."""


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"C++ compile error\n\nCommand:\ng++ /tmp/x.cpp -o /tmp/x.so\n\nOutput:\n{CC1PLUS}", "file_size"),
        (ASSEMBLER, "file_size"),
        ("collect2: fatal error: ld terminated with signal 25 [File size limit exceeded]", "file_size"),  # gcc's collect2 wording
        ("OSError: [Errno 27] File too large: '/tmp/torchinductor_u/xy/c.cpp'", "file_size"),
        ("/tmp/ccA.s: Fatal error: can't write 512 bytes to section .text: No space left on device", "disk"),
        ("OSError: [Errno 122] Disk quota exceeded", "disk"),
        ("virtual memory exhausted: Cannot allocate memory", "memory"),
        ("cc1plus: out of memory allocating 65536 bytes after a total of 1073741824 bytes", "memory"),
        ("terminate called after throwing an instance of 'std::bad_alloc'", "memory"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "gpu_memory"),
        ("g++: fatal error: Killed signal terminated program cc1plus", "killed"),
    ],
)
def test_resource_lines_are_named(text: str, kind: str) -> None:
    found = resources.from_text(text)
    assert found is not None and found.kind == kind
    assert found.evidence["line"] in text and found.found in text


@pytest.mark.parametrize(
    "text",
    [
        "/tmp/x.cpp:12:5: error: 'foo' was not declared in this scope",
        "RuntimeError: shape '[2, -1, 8]' is invalid for input of size 30",
        "error: unrecognized command-line option '-mavx512fp16'",
    ],
)
def test_other_failures_are_not_resource_failures(text: str) -> None:
    assert resources.from_text(text) is None


def _chained(inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise RuntimeError("InductorError: wrapped") from exc
    except RuntimeError as outer:
        return outer


def test_errnos_and_memory_errors_are_read_through_the_exception_chain() -> None:
    big = resources.from_exception(_chained(OSError(errno.EFBIG, "File too large", "/w/model.pt2")))
    assert big is not None and big.kind == "file_size" and big.evidence["errno"] == "EFBIG"
    assert big.evidence["file"] == "/w/model.pt2" and "rlimit_fsize_bytes" in big.evidence
    full = resources.from_exception(OSError(errno.ENOSPC, "No space left on device"))
    assert full is not None and full.kind == "disk" and full.found.startswith("ENOSPC")
    quota = resources.from_exception(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert quota is not None and quota.kind == "disk"
    memory = resources.from_exception(_chained(MemoryError()))
    assert memory is not None and memory.kind == "memory"
    assert resources.from_exception(OSError(errno.EACCES, "Permission denied")) is None
    assert resources.from_exception(ValueError("bad shape")) is None


def test_child_signals_and_exceptions() -> None:
    xfsz = ChildCrashed("run", "", "", 0.1, returncode=-signal.SIGXFSZ)
    killed = ChildCrashed("run", "", "", 0.1, returncode=-signal.SIGKILL)
    segv = ChildCrashed("run", "", "", 0.1, returncode=-signal.SIGSEGV)
    assert (resources.from_child(xfsz) or _none()).kind == "file_size"
    sigkill = resources.from_child(killed)
    assert sigkill is not None and sigkill.kind == "killed" and "not established" in sigkill.what  # said as likely, not as fact
    assert resources.from_child(segv) is None  # a crash of the native code is not the machine's doing
    host = ChildRaised("run", "", "", 0.1, evidence={"type": "MemoryError", "message": "std::bad_alloc"})
    assert (resources.from_child(host) or _none()).kind == "memory"
    disk = ChildRaised("load", "", "", 0.1, evidence={"type": "OSError", "message": "[Errno 28] No space left on device"})
    assert (resources.from_child(disk) or _none()).kind == "disk"
    plain = ChildRaised("run", "", "", 0.1, evidence={"type": "RuntimeError", "message": "expected 2 inputs"})
    assert resources.from_child(plain) is None


def _none() -> resources.Exhausted:
    raise AssertionError("no resource found")


def test_the_finding_says_what_ran_out_and_exits_3() -> None:
    ex = resources.from_text(CC1PLUS)
    assert ex is not None
    f = resources.finding(ex, "compile", "compiling Net")
    assert f.code == "build.resource_exhausted" and f.severity is Severity.ERROR
    assert f.message.startswith("compiling Net stopped: a file reached the file-size limit (ulimit -f)")
    assert f.found == CC1PLUS and "ulimit -f" in (f.hint or "") and f.evidence["resource"] == "file_size"
    report = Report(kind="build", package={}, phases=(make_phase("compile", 1.0, [f]),))
    assert report.exit_code == 3  # the machine stopped the build: not a verdict on the model
    twin = resources.finding(ex, "debug_twin", "compiling the debug twin", severity=Severity.WARNING)
    assert twin.severity is Severity.WARNING


def test_a_resource_error_escaping_a_step_becomes_its_finding() -> None:
    def writes(state: object) -> tuple[list[object], dict[str, object]]:
        raise OSError(errno.EFBIG, "File too large", "/w/golden.safetensors")

    def denied(state: object) -> tuple[list[object], dict[str, object]]:
        raise OSError(errno.EACCES, "Permission denied")

    (name, step), (_, other) = resources.guarded([("validate", writes), ("package", denied)])  # type: ignore[list-item]
    with pytest.raises(StepFailed) as stop:
        step(None)
    (f,) = stop.value.findings
    assert name == "validate" and f.code == "build.resource_exhausted" and f.phase == "validate"
    assert f.evidence["errno"] == "EFBIG" and "in writes" in f.evidence["at"]
    with pytest.raises(OSError):
        other(None)  # anything else is not ours to rename


def test_a_compile_failure_is_said_as_what_is_known() -> None:
    lines, hint = describe_compile_error(CppCompileError(f"C++ compile error\n\nOutput:\n{CC1PLUS}"))
    assert CC1PLUS in lines and hint.startswith("a file reached the file-size limit")
    lines, hint = describe_compile_error(CppCompileError("C++ compile error\n/tmp/x.cpp:3:1: error: expected ';' before '}' token"))
    assert "Inductor bug" not in hint and "likely" not in hint
    assert "the C++ compiler rejected the code Inductor generated" in hint and "--minify" in hint
