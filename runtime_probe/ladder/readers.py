"""Reading what a failing child printed: pure functions over text, unit-tested on recorded output.

Each function turns one tool's output into facts: the kernel printer's launch lines, AOTI's NaN
assert, compute-sanitizer's first error, and a debugger's backtrace (with a classification of its
frames into a likely cause). What any failing run prints without a tool (CUDA error messages,
AOTI's positional input-check messages) is read in ``runtime_probe.child.messages``, beside the
table that turns a child's failure into a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

__all__ = [
    "Frames",
    "KernelTrace",
    "SanitizerError",
    "SanitizerReport",
    "classify_frames",
    "first_sanitizer_error",
    "kernel_trace",
    "nan_buffer",
    "parse_backtrace",
    "sanitizer_report",
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
    """One error record of compute-sanitizer's memcheck."""

    kind: str  # "Invalid __global__ read of size 4 bytes"
    kernel: str | None
    thread: str | None
    block: str | None
    address: str | None  # the address line ("Access to 0x7f... is out of bounds")
    errors: int | None  # ERROR SUMMARY count
    location: str | None = None  # source file:line of the faulting instruction, when reported
    access: str | None = None  # "read" | "write" (an invalid access), else None
    size: int | None = None  # bytes of the access
    nearest: str | None = None  # "and is N bytes after the nearest allocation at 0x... of size M bytes"


@dataclass(frozen=True)
class SanitizerReport:
    """Every error memcheck printed, in order, and its ERROR SUMMARY count (None: no summary line)."""

    errors: tuple[SanitizerError, ...]
    summary: int | None

    def kernels(self) -> dict[str, int]:
        """Kernel name -> how many errors it made, in the order they first appear."""
        counts: dict[str, int] = {}
        for e in self.errors:
            counts[e.kernel or "?"] = counts.get(e.kernel or "?", 0) + 1
        return counts


_SAN = "========="
# the first words of an error record's head line; "Program hit CUDA_ERROR_LAUNCH_FAILED" is the
# launch that memcheck itself stopped, a consequence of the error before it, not one of its own
_HEADS = ("Invalid", "Out-of-range", "Misaligned", "Malformed", "Barrier", "Illegal", "Uninitialized", "Race", "Program hit")
_ACCESS = re.compile(r"Invalid __(\w+)__ (read|write) of size (\d+) bytes?")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")


def sanitizer_report(output: str) -> SanitizerReport:
    """Every error record of compute-sanitizer's memcheck output, in one pass over its lines.

    A record starts at a head line ("Invalid __global__ write of size 4 bytes") and takes the
    lines under it until the next head: ``at KERNEL+0xOFF in FILE:LINE``, ``by thread (x,y,z) in
    block (x,y,z)``, ``Access to 0x... is out of bounds``, ``and is N bytes after the nearest
    allocation ...``; host frames are skipped. Lines without the ``=========`` prefix are the
    program's own and are ignored. Each line is looked at once, with anchored patterns only."""
    errors: list[SanitizerError] = []
    record: dict[str, object] | None = None
    summary: int | None = None
    for raw in output.splitlines():
        if not raw.startswith(_SAN):
            continue
        line = raw[len(_SAN) :].strip()
        if line.startswith(_HEADS) and not line.startswith("Program hit CUDA_ERROR_LAUNCH_FAILED"):
            if record is not None:
                errors.append(_sanitizer_error(record))
            record = {"kind": line}
            continue
        m = _SUMMARY.match(line)
        if m and "not printed" not in line:  # "ERROR SUMMARY: 6 errors were not printed" follows the total
            summary = int(m.group(1))
        elif record is not None:
            _sanitizer_line(record, line)
    if record is not None:
        errors.append(_sanitizer_error(record))
    return SanitizerReport(tuple(replace(e, errors=summary) for e in errors), summary)


def _sanitizer_line(record: dict[str, object], line: str) -> None:
    """One line under a record's head, into ``record``."""
    if line.startswith("at ") and "kernel" not in record and not line.startswith("at 0x"):
        where, sep, location = line[3:].rpartition(" in ")
        if not sep:
            where, location = line[3:], ""
        name, plus, offset = where.rpartition("+0x")
        record["kernel"] = (name if plus and all(c in "0123456789abcdef" for c in offset) else where).strip()
        record["location"] = location.strip() or None
    elif line.startswith("by thread (") and "thread" not in record:
        thread, _, rest = line[len("by thread (") :].partition(") in block (")
        record["thread"], record["block"] = thread, rest.rstrip(")")
    elif line.startswith("Access to ") or line.endswith("is out of bounds") or line.startswith("Address "):
        record.setdefault("address", line)
    elif line.startswith("and is ") and "nearest allocation" in line:
        record.setdefault("nearest", line)


def _sanitizer_error(record: dict[str, object]) -> SanitizerError:
    kind = str(record["kind"])
    m = _ACCESS.match(kind)

    def get(key: str) -> str | None:
        return str(record[key]) if record.get(key) is not None else None

    return SanitizerError(
        kind,
        get("kernel"),
        get("thread"),
        get("block"),
        get("address"),
        None,
        get("location"),
        access=m.group(2) if m else None,
        size=int(m.group(3)) if m else None,
        nearest=get("nearest"),
    )


def first_sanitizer_error(output: str) -> SanitizerError | None:
    """The first error compute-sanitizer (memcheck) reported, or None."""
    report = sanitizer_report(output)
    return report.errors[0] if report.errors else None


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
