"""An example input whose size lies outside the range declared for it.

torch.export refuses it before tracing, in words that name neither the input nor the Dim:
``ConstraintViolationError: 2 not in range [4, 8]`` (torch 2.11 to 2.15; the range is the size's,
``[2, 8]`` for ``Dim(min=1, max=8)``, torch raising a minimum of 1 to 2). The declared dims and
the example's size of each (export/hints.py, ``Declared``) say which one it is; the fix is either
an example inside the range (the range the user asked stays) or a range that includes the example.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aoti_guard.builder.export.hints import Advice, Declared, dynamic_fix

__all__ = ["example_outside_advice"]

_NOT_IN_RANGE = re.compile(r"\b(?P<size>\d+) not in range \[(?P<lo>-?\d+), (?P<hi>-?\d+|-?oo|-?int_oo|-?inf)\]")


def example_outside_advice(text: str, declared: Sequence[Declared], *, from_flags: bool = False) -> Advice | None:
    """The fix for torch's "N not in range [LO, HI]": for each declared dim whose example lies
    outside its range, an example size inside it and the flags (and code) of a range that
    includes the example. None when torch's message is not that one."""
    m = _NOT_IN_RANGE.search(text)
    if m is None:
        return None
    outside = [(d, value) for d in declared if (value := _root_value(d)) is not None and not _inside(d, value)]
    if not outside:
        return Advice(
            f"an example input's size, {m['size']}, is outside the range {m['lo']}..{m['hi']} declared for its dimension "
            "(torch.export's words above; it names no input): give an example inside the declared range, or widen the range to include it"
        )
    ranges = {d.name: (d.min, d.max) for d in declared}
    notes: list[str] = []
    examples: dict[str, int] = {}
    for name in dict.fromkeys(d.name for d, _ in outside):
        first, value = next((d, v) for d, v in outside if d.name == name)
        lo, hi = first.min, first.max
        inside = min(max(value, lo if lo is not None else value), hi if hi is not None else value)
        if inside in (0, 1) and (hi is None or hi >= 2):
            inside = 2  # torch specializes an example size of 0 or 1: the next size keeps the range dynamic
        ranges[name] = (None if lo is None else min(lo, value), None if hi is None else max(hi, value))
        sharing = [d for d in declared if d.name == name]
        for d in sharing:
            examples[d.where] = d.mul * inside + d.add
        asked = _sizes(first, lo, hi)
        notes.append(
            f"{first.where} ({name}): the example's size is {first.example}, outside the range you declared, {asked}. "
            "Keep that range and give an example inside it: "
            + ", ".join(f"{d.input}.shape[{d.dim}] = {examples[d.where]}" for d in sharing)
            + ("" if len(sharing) == 1 else f" (the inputs that share {name})")
            + f"; or widen the range to {_sizes(first, *ranges[name])}, which includes the example."
        )
    flags, code = dynamic_fix(declared, ranges)
    flag_text = " ".join(f"--dynamic {f}" for f in flags)
    if flags and from_flags:
        widen = f"The wider range: build with: {flag_text}; in a factory's dynamic_shapes: {code}"
    elif flags:
        widen = f"The wider range, in the factory's dynamic_shapes: {code} (or drop them and build with {flag_text})"
    else:
        widen = f"The wider range, in the factory's dynamic_shapes: {code}"
    return Advice(" ".join([*notes, widen]), flags, code, tuple(examples.items()))


def _root_value(d: Declared) -> int | None:
    """The free symbol's value at the example's size; None where the size is not ``mul * k + add``."""
    if d.example is None or (d.example - d.add) % d.mul:
        return None
    return (d.example - d.add) // d.mul


def _inside(d: Declared, value: int) -> bool:
    return (d.min is None or value >= d.min) and (d.max is None or value <= d.max)


def _sizes(d: Declared, lo: int | None, hi: int | None) -> str:
    """The range of ``d``'s sizes for its symbol in [lo, hi] (``8..64 in steps of 8`` for 8*k)."""
    size_lo = "" if lo is None else str(d.mul * lo + d.add)
    size_hi = "" if hi is None else str(d.mul * hi + d.add)
    return f"{size_lo}..{size_hi}" + (f" in steps of {d.mul}" if d.mul > 1 else "")
