"""Per-call state shared by the checks of one call: the symbols bound so far, and derived sizes
to check once every input has bound its symbols."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_probe.errors import InputContractError
from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim

__all__ = ["Env"]


class Env:
    """Per-call bindings: symbol -> (size, input name, dim) it was first read from, and derived dims
    to check last."""

    __slots__ = ("pending", "symbols")

    def __init__(self) -> None:
        self.symbols: dict[str, tuple[int, str, int]] = {}
        self.pending: list[tuple[str, int, Dim, Callable[[Any], int], int]] = []

    def finish(self) -> None:
        if not self.pending:
            return
        values = {k: v[0] for k, v in self.symbols.items()}
        for name, i, d, fn, size in self.pending:
            try:
                want = fn(values)
            except _symexpr.ExprError:
                continue  # a symbol no input carries plainly: the range check above is all we can do
            if want != size:
                raise InputContractError(
                    f"{name}: dim {i} is {size}, but {d.expr!r} is {want} here",
                    code="input.range",
                    argument=name,
                    expected=f"{d.expr} = {want}",
                    found=str(size),
                )
