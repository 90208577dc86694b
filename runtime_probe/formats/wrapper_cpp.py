"""Facts read from the generated ``*.wrapper.cpp`` that AOTI ships in every package.

No .so is opened: the generated source names each runtime constant (FQN, dtype, shape), the file
each GPU kernel is loaded from, and ends with the exact compile command (``-march=native``,
``-mavx2``...). All are plain text, so they can be checked on a host before anything native runs.
The format is generated code and may drift between torch releases: every reader here tolerates
absence and returns what it found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["KernelLoad", "SizeCheck", "WrapperConstant", "WrapperFacts", "parse_wrapper_cpp", "size_checks"]

# Every pattern here runs over hostile text (a package's wrapper.cpp, up to 256 MB), so each is
# linear in it: anchored at a literal, numbers bounded, and no scan that the next start repeats.
# The unanchored ``constants_info_\[(\d+)\]\.(\w+)\s*=\s*(.*?);\s*$`` rescanned the rest of the
# line from every occurrence: 370 KB of ``constants_info_[0].a = `` took minutes (issue 40).
# ``constants_info_[3].name = "lin_weight";``: one assignment per line, read line by line
_CONST_HEAD = re.compile(r"constants_info_\[(\d{1,9})\]\.(\w+)\s*=")
_DTYPE = re.compile(r"cached_torch_dtype_(\w+)")
# AOTInductorModelBase(num_inputs, num_outputs, num_constants, device_str, cubin_dir, include_weights):
# the counts after the literal, the flag searched for up to the call's end (its ``;`` or ``{``)
_BASE_HEAD = re.compile(r"AOTInductorModelBase\(\s*(\d{1,9}),\s*(\d{1,9}),\s*(\d{1,9}),")
_BASE_TAIL = re.compile(r",\s*(true|false)\s*\)")
# cpp_wrapper_cpu.py's generated input checks (torch 2.11 .. 2.13):
#   ss << "input_handles[0]: dim value is too large at 0, "
#      << "expected to be <= 15, " << "but got: "
_SIZE_CHECK = re.compile(
    r'input_handles\[(\d{1,9})\]: dim value is too (large|small) at (\d{1,9}), "\s*<<\s*"expected (?:it )?to be (<=|>=) (-?\d{1,19})'
)
# cpp_wrapper_gpu.py's generate_load_kernel, file form (torch 2.11 .. 2.13):
#   kernels_.triton_poi_fused_1 = loadKernel("/tmp/torchinductor_u/ab/cab.cubin", "triton_poi_fused_1", 0, cubin_dir_);
# The embedded form passes a pointer (``loadKernel(__triton_poi_fused_1_start, ...``) and the lazy
# one a variable: neither names a file, neither matches. Read at each "loadKernel(" of a line
# (literals cannot span lines), each literal bounded and ended by its first unescaped quote: an
# attempt at a "loadKernel(" inside a literal reads on only to that quote, so no character is read
# more than twice.
_LOAD_KERNEL = re.compile(r'loadKernel\(\s{0,64}"((?:[^"\\\n]|\\.){0,4096})"\s{0,64},\s{0,64}"((?:[^"\\\n]|\\.){1,1024})"')
# what cpp_string_literal escapes; any other escaped character stands for itself
_UNESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"n": "\n", "t": "\t", "r": "\r"}
_COMPILE_CMD = re.compile(r"//\s*Compile cmd\s*\n//\s*(.+)")
_ISA_FLAG = re.compile(r"-m(avx|fma|f16c|sse|amx|bmi|popcnt|vnni)")


@dataclass(frozen=True)
class SizeCheck:
    """One size bound the wrapper's own input checks enforce (``AOTI_RUNTIME_CHECK_INPUTS=1``)."""

    input_index: int  # AOTI's input_handles[i]: the i-th tensor input
    dim: int
    kind: str  # "max" | "min"
    value: int


@dataclass(frozen=True)
class KernelLoad:
    """A kernel the wrapper loads from a file at its first call. torch's package loader passes the
    model's extracted folder as ``cubin_dir``, and the wrapper opens ``cubin_dir / file``: the file
    must be in the model's folder of the package, whatever the build path was."""

    kernel: str  # the kernel's (mangled) name, as cuModuleGetFunction looks it up
    file: str  # the path's last component (std::filesystem's filename(): "" for a path ending in "/")


@dataclass
class WrapperConstant:
    index: int
    name: str = ""
    original_fqn: str = ""
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    from_folded: bool = False
    type: str = ""


@dataclass
class WrapperFacts:
    constants: list[WrapperConstant] = field(default_factory=list)
    compile_command: str | None = None
    march: str | None = None
    isa_flags: tuple[str, ...] = ()  # -mavx2 -mfma ... as given on the command line
    compiler: str | None = None
    num_constants: int | None = None
    # False: the .so was built without its constants (package_constants_in_so=False, or weights
    # written beside it as a binary blob): someone must load them before the first call.
    include_weights: bool | None = None
    kernel_loads: list[KernelLoad] = field(default_factory=list)  # in the order generated, each once

    def runtime_constants(self) -> dict[str, str]:
        """FQN -> internal name, for the constants a user can replace (not folded ones)."""
        return {c.original_fqn: c.name for c in self.constants if c.original_fqn and not c.from_folded}


def parse_wrapper_cpp(text: str) -> WrapperFacts:
    """What the generated source says; linear in its length, whatever it holds."""
    facts = WrapperFacts()
    by_index: dict[int, WrapperConstant] = {}
    loads: dict[KernelLoad, None] = {}
    for line in text.split("\n"):
        assignment = _constant_assignment(line)
        if assignment is not None:
            _set_constant_field(by_index, *assignment)
        if "loadKernel(" in line:
            loads.update(dict.fromkeys(_kernel_loads(line)))
    facts.constants = [by_index[i] for i in sorted(by_index)]
    facts.kernel_loads = list(loads)
    base = _model_base(text)
    if base is not None:
        facts.num_constants, facts.include_weights = base
    cmd = _compile_command(text)
    if cmd:
        facts.compile_command = cmd
        parts = cmd.split()
        facts.compiler = parts[0] if parts else None
        march = [p.split("=", 1)[1] for p in parts if p.startswith("-march=")]
        facts.march = march[-1] if march else None
        facts.isa_flags = tuple(sorted({p for p in parts if _ISA_FLAG.match(p)}))
    return facts


def _constant_assignment(line: str) -> tuple[int, str, str] | None:
    """``constants_info_[i].attr = value;`` in one line: (i, attr, value), else None. The value
    runs to the line's last ``;`` (a quoted name may hold one)."""
    at = line.find("constants_info_[")
    if at < 0:
        return None
    head = _CONST_HEAD.match(line, at)
    if head is None:
        return None
    rest = line[head.end() :].rstrip()
    if not rest.endswith(";"):
        return None
    return int(head.group(1)), head.group(2), rest[:-1].strip()


def _kernel_loads(line: str) -> list[KernelLoad]:
    """Every file-form ``loadKernel("PATH", "NAME", ...`` in one line."""
    out: list[KernelLoad] = []
    at = line.find("loadKernel(")
    while at >= 0:
        m = _LOAD_KERNEL.match(line, at)
        if m is not None:
            path, name = _unescape(m.group(1)), _unescape(m.group(2))
            out.append(KernelLoad(name, path.rsplit("/", 1)[-1]))
        at = line.find("loadKernel(", m.end() if m is not None else at + 1)
    return out


def _unescape(literal: str) -> str:
    return _UNESCAPE.sub(lambda m: _ESCAPED.get(m.group(1), m.group(1)), literal)


def _set_constant_field(by_index: dict[int, WrapperConstant], idx: int, attr: str, value: str) -> None:
    c = by_index.setdefault(idx, WrapperConstant(idx))
    quoted = value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else None
    if attr == "name" and quoted is not None:
        c.name = quoted
    elif attr == "original_fqn" and quoted is not None:
        c.original_fqn = quoted
    elif attr == "dtype":
        d = _DTYPE.search(value)
        c.dtype = d.group(1) if d else None
    elif attr == "shape":
        c.shape = _int_list(value)
    elif attr == "from_folded":
        c.from_folded = value == "true"
    elif attr == "type":
        c.type = value.rsplit("::", 1)[-1].rstrip(")")


def _int_list(value: str) -> tuple[int, ...] | None:
    """``{16, 16}`` (``{16L}`` too) as a tuple; None when there is no braced list of integers."""
    start = value.find("{")
    end = value.find("}", start + 1) if start >= 0 else -1
    if end < 0:
        return None
    try:
        return tuple(int(x.strip().rstrip("L")) for x in value[start + 1 : end].split(",") if x.strip())
    except ValueError:  # not an integer, or one of more digits than int() reads
        return None


def _model_base(text: str) -> tuple[int, bool] | None:
    """(num_constants, include_weights) of the first ``AOTInductorModelBase(...)`` call whose
    counts and flag read. A call whose flag is not found before its end (the next ``;`` or ``{``)
    is skipped with every call that starts inside it (their flags would be searched for in the
    same span), so each character is scanned once."""
    pos = 0
    while (head := _BASE_HEAD.search(text, pos)) is not None:
        ends = [i for i in (text.find(";", head.end()), text.find("{", head.end())) if i >= 0]
        end = min(ends) if ends else len(text)
        tail = _BASE_TAIL.search(text, head.end(), end)
        if tail is not None:
            return int(head.group(3)), tail.group(1) == "true"
        pos = end
    return None


def _compile_command(text: str) -> str | None:
    # The generated file ends with "// Compile cmd\n// g++ ...". Older releases had none.
    m = _COMPILE_CMD.search(text[-20000:])
    return m.group(1).strip() if m else None


def size_checks(texts: Iterable[str]) -> list[SizeCheck]:
    """Every size bound the generated wrappers check, once each, in the order found. Kept out of
    ``parse_wrapper_cpp``: only the build needs it, and the probe should not scan for it."""
    out: list[SizeCheck] = []
    for text in texts:
        for m in _SIZE_CHECK.finditer(text):
            bound = SizeCheck(int(m.group(1)), int(m.group(3)), "max" if m.group(2) == "large" else "min", int(m.group(5)))
            if bound not in out:
                out.append(bound)
    return out
