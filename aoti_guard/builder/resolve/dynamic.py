"""``--dynamic`` flags: dynamic dimensions given on the command line.

Syntax: ``INPUT:DIM=[A*]NAME[+B][:MIN..MAX]``. ``x:0=batch:1..64`` makes dim 0 of input ``x`` the
symbol ``batch`` in [1, 64]; ``mask:0=batch`` gives ``mask`` the same symbol (so their sizes must be
equal); ``MIN..`` leaves the maximum open. A range given twice for one name must agree.

A derived size, ``ids:1=8*seq8:1..64``, makes the dimension ``8 * seq8`` with ``seq8`` in [1, 64]:
what torch.export suggests when the model's code only works on multiples ("Suggested fixes:
seq = 8*_seq"); ``labels:1=seq+1`` ties a dimension to another plus a constant. The range is
always the range of NAME, the free symbol.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime_probe.reporting.errors import UsageError

__all__ = ["DynamicDim", "dynamic_shapes_from_flags", "parse_dynamic"]

_FLAG = re.compile(
    r"^(?P<input>[A-Za-z_]\w*):(?P<dim>-?\d+)="
    r"(?:(?P<mul>\d+)\*)?(?P<name>[A-Za-z_]\w*)(?:\+(?P<add>\d+))?"
    r"(?::(?P<min>\d+)?\.\.(?P<max>\d+)?)?$"
)
_SYNTAX = "write INPUT:DIM=NAME[:MIN..MAX], e.g. --dynamic x:0=batch:1..64 (a derived size: ids:1=8*seq8:1..64)"


@dataclass(frozen=True)
class DynamicDim:
    input: str
    dim: int
    name: str
    min: int | None
    max: int | None
    mul: int = 1  # the size is mul * NAME + add
    add: int = 0

    @property
    def text(self) -> str:
        """The flag's text, as ``parse_dynamic`` reads it back."""
        size = f"{self.mul}*{self.name}" if self.mul != 1 else self.name
        size += f"+{self.add}" if self.add else ""
        bounds = (
            ""
            if self.min is None and self.max is None
            else f":{'' if self.min is None else self.min}..{'' if self.max is None else self.max}"
        )
        return f"{self.input}:{self.dim}={size}{bounds}"


def parse_dynamic(flags: Sequence[str]) -> list[DynamicDim]:
    """Parse the flags. Raises UsageError naming the bad flag and the expected syntax."""
    out: list[DynamicDim] = []
    ranges: dict[str, tuple[int | None, int | None]] = {}
    for flag in flags:
        m = _FLAG.match(flag.strip())
        if not m:
            raise UsageError(f"cannot read --dynamic {flag!r}", hint=_SYNTAX)
        mul = int(m["mul"]) if m["mul"] is not None else 1
        if mul < 1:
            raise UsageError(f"--dynamic {flag!r}: the multiplier must be 1 or more", hint=_SYNTAX)
        lo = int(m["min"]) if m["min"] is not None else None
        hi = int(m["max"]) if m["max"] is not None else None
        if lo is not None and hi is not None and lo > hi:
            raise UsageError(f"--dynamic {flag!r}: minimum {lo} is above maximum {hi}", hint="write MIN..MAX with MIN <= MAX")
        name = m["name"]
        if m["min"] is not None or m["max"] is not None:
            if name in ranges and ranges[name] != (lo, hi):
                raise UsageError(
                    f"--dynamic gives {name!r} two ranges: {ranges[name]} and {(lo, hi)}",
                    hint="give a shared symbol's range once, or the same range each time",
                )
            ranges[name] = (lo, hi)
        out.append(DynamicDim(m["input"], int(m["dim"]), name, lo, hi, mul, int(m["add"] or 0)))
    return [DynamicDim(d.input, d.dim, d.name, *ranges.get(d.name, (d.min, d.max)), d.mul, d.add) for d in out]


def dynamic_shapes_from_flags(dims: Sequence[DynamicDim], bound_inputs: Mapping[str, Any]) -> dict[str, Any]:
    """torch.export ``dynamic_shapes`` keyed by forward() parameter name.

    ``bound_inputs`` maps parameter names to the example values, to check names and ranks.
    """
    import torch
    from torch.export import Dim

    symbols: dict[str, Any] = {}
    shapes: dict[str, dict[int, Any]] = {}
    for d in dims:
        if d.input not in bound_inputs:
            raise UsageError(
                f"--dynamic names input {d.input!r}, which forward() does not take", hint=f"inputs: {', '.join(bound_inputs) or 'none'}"
            )
        value = bound_inputs[d.input]
        if not isinstance(value, torch.Tensor):
            raise UsageError(f"--dynamic names input {d.input!r}, which is not a tensor", hint="only tensor inputs have dynamic dimensions")
        dim = d.dim if d.dim >= 0 else value.dim() + d.dim
        if not 0 <= dim < value.dim():
            raise UsageError(
                f"--dynamic {d.input}:{d.dim}: {d.input} has {value.dim()} dimension(s)", hint=f"use a dimension in 0..{value.dim() - 1}"
            )
        if d.name not in symbols:
            kwargs: dict[str, int] = {}
            if d.min is not None:
                kwargs["min"] = d.min
            if d.max is not None:
                kwargs["max"] = d.max
            symbols[d.name] = Dim(d.name, **kwargs)
        size = symbols[d.name]
        if d.mul != 1:
            size = d.mul * size
        if d.add:
            size = size + d.add
        shapes.setdefault(d.input, {})[dim] = size
    return {name: shapes.get(name) for name in bound_inputs}
