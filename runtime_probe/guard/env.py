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

    def _bind_from(self, name: str, i: int, d: Dim, size: int, values: dict[str, int]) -> int | None:
        """A size over a symbol no input carries plainly (``16*h16``, ``8*seq8``): the symbol's value
        from this size, bound for the sizes checked after it (the mask's ``8*seq8`` must agree with
        the ids'). Returns the size the expression gives (``size`` itself), or None when the
        expression is not affine in one unknown. Raises InputContractError when no value gives
        ``size`` (a 24-pixel side for ``16*h16``): the range check alone let that reach native code.
        """
        unknown = sorted(_symexpr.free_symbols(d.expr) - set(values))
        if len(unknown) != 1:
            return None
        sym = unknown[0]
        fn = _symexpr.compile_expr(d.expr)
        slope = [fn({**values, sym: v}) for v in (1, 2, 3)]
        if slope[1] - slope[0] != slope[2] - slope[1] or slope[1] == slope[0]:
            return None  # not affine (a floor, a product of symbols): nothing simple to invert
        found = _symexpr.solve_for(d.expr, sym, size, values, 0, search=False)
        if found is None:
            raise InputContractError(
                f"{name}: dim {i} is {size}, which {d.expr!r} never equals",
                code="input.range",
                argument=name,
                expected=d.expr,
                found=str(size),
                hint=f"give dim {i} a size of the form {d.expr}",
            )
        values[sym] = found
        self.symbols[sym] = (found, name, i)
        return size

    def finish(self) -> None:
        if not self.pending:
            return
        values = {k: v[0] for k, v in self.symbols.items()}
        for name, i, d, fn, size in self.pending:
            try:
                want = fn(values)
            except _symexpr.ExprError:
                solved = self._bind_from(name, i, d, size, values)
                if solved is None:
                    continue  # not affine in one unknown symbol: the range check above is all we can do
                want = solved
            if want != size:
                raise InputContractError(
                    f"{name}: dim {i} is {size}, but {d.expr!r} is {want} here",
                    code="input.range",
                    argument=name,
                    expected=f"{d.expr} = {want}",
                    found=str(size),
                )
