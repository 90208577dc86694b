"""Reading what a failing child printed: pure functions over text, unit-tested on recorded output.

Each function turns one tool's output into facts: the kernel printer's launch lines, AOTI's NaN
assert, compute-sanitizer's first error, and a debugger's backtrace (with a classification of its
frames into a likely cause). What any failing run prints without a tool (CUDA error messages,
AOTI's positional input-check messages) is read in ``runtime_probe.child.messages``, beside the
table that turns a child's failure into a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "Frames",
    "KernelTrace",
    "SanitizerError",
    "classify_frames",
    "first_sanitizer_error",
    "kernel_trace",
    "nan_buffer",
    "parse_backtrace",
]

# Level 3 prints "[ before_launch: KERNEL ]"; level 2 "[  before_launch - KERNEL - ARG  ]:" once per
# tensor argument (runtime_probe/ladder/printer.py reads its values).
_LAUNCH = re.compile(r"\[\s*(before_launch|after_launch)\s*[:\-]\s*(\S+?)(?:\s+-\s+\S+)?\s*\]")
_NAN = re.compile(r"At least one (NaN|Inf|INF|nan|inf)[^\n]*? in (\w+)")


@dataclass(frozen=True)
class KernelTrace:
    """The kernel printer's view of a run."""

    launched: tuple[str, ...]  # before_launch order
    unfinished: str | None  # last kernel launched without its after_launch line (it was running)
    last_finished: str | None  # last after_launch


def kernel_trace(stdout: str) -> KernelTrace:
    launched: list[str] = []
    open_: list[str] = []
    last_done: str | None = None
    previous: tuple[str, str] | None = None
    for kind, name in _LAUNCH.findall(stdout):
        if (kind, name) == previous:
            continue  # level 2: the same launch, its next argument
        previous = (kind, name)
        if kind == "before_launch":
            launched.append(name)
            open_.append(name)
        else:
            last_done = name
            if name in open_:
                open_.remove(name)
    return KernelTrace(tuple(launched), open_[-1] if open_ else None, last_done)


def nan_buffer(stderr: str) -> tuple[str, str] | None:
    """('NaN' | 'Inf', buffer) from AOTI's nan assert ('At least one NaN in buf3')."""
    m = _NAN.search(stderr)
    return ("NaN" if m.group(1).lower() == "nan" else "Inf", m.group(2)) if m else None


@dataclass(frozen=True)
class SanitizerError:
    kind: str  # "Invalid __global__ read of size 4 bytes"
    kernel: str | None
    thread: str | None
    block: str | None
    address: str | None  # the address line
    errors: int | None  # ERROR SUMMARY count
    location: str | None = None  # source file:line of the faulting instruction, when reported


_SAN = "========="


def first_sanitizer_error(output: str) -> SanitizerError | None:
    """The first error compute-sanitizer (memcheck) reported, or None."""
    lines = [line[len(_SAN) :].strip() if line.startswith(_SAN) else None for line in output.splitlines()]
    summary = re.search(r"ERROR SUMMARY: (\d+) error", output)
    for i, line in enumerate(lines):
        if (
            line
            and re.match(r"(Invalid|Out-of-range|Misaligned|Malformed|Barrier|Illegal|Uninitialized|Race|Program hit)", line)
            and not line.startswith("Program hit CUDA_ERROR_LAUNCH_FAILED")
        ):
            kernel = thread = block = address = location = None
            for follow in lines[i + 1 : i + 12]:
                if not follow:
                    continue
                m = re.match(r"at (.+?)(\+0x[0-9a-f]+)?(?: in (.*))?$", follow)
                if m and kernel is None and not follow.startswith("at 0x"):
                    kernel = m.group(1).strip()
                    location = m.group(3).strip() if m.group(3) else None
                m = re.match(r"by thread \(([^)]*)\) in block \(([^)]*)\)", follow)
                if m:
                    thread, block = m.group(1), m.group(2)
                if follow.startswith("Address") or "is out of bounds" in follow:
                    address = address or follow
            return SanitizerError(line, kernel, thread, block, address, int(summary.group(1)) if summary else None, location)
    return None


@dataclass(frozen=True)
class Frames:
    frames: tuple[str, ...]  # "function  [library]" innermost first
    signal: str | None = None
    libraries: tuple[str, ...] = field(default=())


_GDB_FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(.+?)(?: \(.*?\))?(?: from (\S+)| at (\S+))?\s*$")
_GDB_SIGNAL = re.compile(r"received signal (SIG\w+)")


def parse_backtrace(text: str, limit: int = 40) -> Frames:
    """Frames of a gdb/cuda-gdb ``bt`` (innermost first), with each frame's library name."""
    frames: list[str] = []
    libs: list[str] = []
    sig = _GDB_SIGNAL.search(text)
    for line in text.splitlines():
        m = _GDB_FRAME.match(line.strip())
        if not m:
            continue
        function = m.group(2).strip()
        lib = (m.group(3) or "").rsplit("/", 1)[-1]
        frames.append(f"{function}  [{lib}]" if lib else function)
        libs.append(lib)
        if len(frames) >= limit:
            break
    return Frames(tuple(frames), sig.group(1) if sig else None, tuple(libs))


_INFERIOR_EXIT = re.compile(r"\[Inferior \d+ \(process \d+\) exited (?:with code (\d+)|normally)\]")
_INFERIOR_KILLED = re.compile(r"Program terminated with signal (SIG\w+)")


def debugger_outcome(text: str) -> str | None:
    """How the program a debugger ran ended, from the debugger's own lines ("SIGSEGV", "exit 1"):
    the debugger's exit code says nothing about it (gdb -batch exits 0 after a crash)."""
    m = _GDB_SIGNAL.search(text) or _INFERIOR_KILLED.search(text)
    if m:
        return m.group(1)
    m = _INFERIOR_EXIT.search(text)
    if m:
        return f"exit {int(m.group(1) or '0', 8)}"  # gdb prints the code in octal
    return None


# (cause, what it means, pattern over one frame). First match over the innermost frames wins.
_CAUSES = [
    (
        "cxx_runtime",
        "a C++ runtime library mismatch: the package's native code runs the C++ standard library (std::regex/locale) "
        "of the compiler that built it against the process's own libstdc++",
        re.compile(
            r"(std::(__cxx11::)?(basic_)?regex|regex_traits|std::__detail::_Compiler|std::codecvt|std::locale|std::ctype|parse_device_str)"
        ),
    ),
    (
        "kernel_image",
        "loading a GPU kernel image (wrong arch, or a corrupt cubin)",
        re.compile(r"(cuModuleLoad|cuLibraryLoad|cudaLibraryLoad|loadKernel|cuModuleGetFunction)"),
    ),
    (
        "weights",
        "reading or updating the model's constants (weights missing, or of the wrong shape or dtype)",
        re.compile(r"(update_constant_buffer|load_constants|ConstantMap|constant_blob|_get_constants|AOTInductorModelContainerUpdate)"),
    ),
    (
        "allocator",
        "the memory allocator (heap corruption, often from constants of the wrong size)",
        re.compile(r"(malloc_consolidate|_int_free|_int_malloc|malloc_printerr|corrupted)"),
    ),
    ("kernel_launch", "a kernel launch", re.compile(r"(cuLaunchKernel|launchKernel|triton_|cpp_fused_)")),
]


def classify_frames(frames: Frames) -> tuple[str, str, str | None]:
    """(cause, explanation, the frame that decided it); cause 'unknown' if no rule matches."""
    for frame in frames.frames[:25]:
        for cause, explanation, pattern in _CAUSES:
            if pattern.search(frame):
                return cause, explanation, frame
    return "unknown", "no known pattern in the native frames", None
