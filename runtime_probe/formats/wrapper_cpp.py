"""Facts read from the generated ``*.wrapper.cpp`` that AOTI ships in every package.

No .so is opened: the generated source names each runtime constant (FQN, dtype, shape) and ends
with the exact compile command (``-march=native``, ``-mavx2``...). Both are plain text, so they can
be checked on a host before anything native runs. The format is generated code and may drift
between torch releases: every reader here tolerates absence and returns what it found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["SizeCheck", "WrapperConstant", "WrapperFacts", "parse_wrapper_cpp", "size_checks"]

_CONST = re.compile(r"constants_info_\[(\d+)\]\.(\w+)\s*=\s*(.*?);\s*$", re.M)
_DTYPE = re.compile(r"cached_torch_dtype_(\w+)")
_INT_LIST = re.compile(r"\{([^}]*)\}")
_QUOTED = re.compile(r'^"(.*)"$')
# AOTInductorModelBase(num_inputs, num_outputs, num_constants, device_str, cubin_dir, include_weights)
_BASE = re.compile(r"AOTInductorModelBase\(\s*(\d+),\s*(\d+),\s*(\d+),[^;{]*?,\s*(true|false)\s*\)")
# cpp_wrapper_cpu.py's generated input checks (torch 2.11 .. 2.13):
#   ss << "input_handles[0]: dim value is too large at 0, "
#      << "expected to be <= 15, " << "but got: "
_SIZE_CHECK = re.compile(
    r'input_handles\[(\d+)\]: dim value is too (large|small) at (\d+), "\s*<<\s*"expected (?:it )?to be (<=|>=) (-?\d+)'
)


@dataclass(frozen=True)
class SizeCheck:
    """One size bound the wrapper's own input checks enforce (``AOTI_RUNTIME_CHECK_INPUTS=1``)."""

    input_index: int  # AOTI's input_handles[i]: the i-th tensor input
    dim: int
    kind: str  # "max" | "min"
    value: int


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

    def runtime_constants(self) -> dict[str, str]:
        """FQN -> internal name, for the constants a user can replace (not folded ones)."""
        return {c.original_fqn: c.name for c in self.constants if c.original_fqn and not c.from_folded}


def parse_wrapper_cpp(text: str) -> WrapperFacts:
    facts = WrapperFacts()
    by_index: dict[int, WrapperConstant] = {}
    for m in _CONST.finditer(text):
        idx, attr, value = int(m.group(1)), m.group(2), m.group(3).strip()
        c = by_index.setdefault(idx, WrapperConstant(idx))
        quoted = _QUOTED.match(value)
        if attr == "name" and quoted:
            c.name = quoted.group(1)
        elif attr == "original_fqn" and quoted:
            c.original_fqn = quoted.group(1)
        elif attr == "dtype":
            d = _DTYPE.search(value)
            c.dtype = d.group(1) if d else None
        elif attr == "shape":
            lst = _INT_LIST.search(value)
            if lst is not None:
                try:
                    c.shape = tuple(int(x.strip().rstrip("L")) for x in lst.group(1).split(",") if x.strip())
                except ValueError:
                    c.shape = None
        elif attr == "from_folded":
            c.from_folded = value == "true"
        elif attr == "type":
            c.type = value.rsplit("::", 1)[-1].rstrip(")")
    facts.constants = [by_index[i] for i in sorted(by_index)]
    base = _BASE.search(text)
    if base is not None:
        facts.num_constants, facts.include_weights = int(base.group(3)), base.group(4) == "true"
    cmd = _compile_command(text)
    if cmd:
        facts.compile_command = cmd
        parts = cmd.split()
        facts.compiler = parts[0] if parts else None
        march = [p.split("=", 1)[1] for p in parts if p.startswith("-march=")]
        facts.march = march[-1] if march else None
        facts.isa_flags = tuple(sorted({p for p in parts if re.match(r"^-m(avx|fma|f16c|sse|amx|bmi|popcnt|vnni)", p)}))
    return facts


def _compile_command(text: str) -> str | None:
    # The generated file ends with "// Compile cmd\n// g++ ...". Older releases had none.
    tail = text[-20000:]
    m = re.search(r"//\s*Compile cmd\s*\n//\s*(.+)", tail)
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
