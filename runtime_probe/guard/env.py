"""Per-call state shared by the checks of one call: the symbols bound so far, the derived sizes to
check once every input has bound its symbols, and the rules that need those symbols.

Every rule is evaluated or the call is refused, never skipped: ``finish`` binds every symbol a size
determines (``8*seq8`` of 64 gives ``seq8 = 8``, in as many passes as it takes), then checks every
derived size and runs the rules that were deferred until then (strides over a derived size); a
rule that still cannot be evaluated refuses the call with ``input.unchecked``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim
from runtime_probe.reporting.errors import InputContractError

__all__ = ["Deferred", "Env"]

# A rule over symbols that were not bound when its input was checked: called with every symbol's
# value once they are; raises InputContractError, or ExprError when it still cannot be evaluated.
Deferred = Callable[[dict[str, int]], None]

_SEARCH_LIMIT = 4096  # values tried for a size that is not affine in its symbol (``(s//2) + 1``)


class Env:
    """Per-call bindings: symbol -> (size, input name, dim) it was first read from; derived dims
    to check last; rules deferred until every symbol is bound."""

    __slots__ = ("deferred", "pending", "symbols")

    def __init__(self) -> None:
        self.symbols: dict[str, tuple[int, str, int | None]] = {}  # dim None: the input's value (data_checks)
        self.pending: list[tuple[str, int, Dim, Callable[[Any], int], int]] = []
        self.deferred: list[tuple[str, str, Deferred]] = []

    def defer(self, name: str, what: str, rule: Deferred) -> None:
        """Run ``rule`` in ``finish``, once every symbol is bound; ``what`` names the rule of input
        ``name`` for the refusal when it cannot be evaluated even then ("strides")."""
        self.deferred.append((name, what, rule))

    def _solve(self, name: str, i: int, d: Dim, size: int, values: dict[str, int]) -> bool:
        """Bind the one unknown symbol of a derived size from ``size`` (``16*h16`` of 48 gives
        ``h16 = 3``), for the sizes and strides checked after it. Returns True when it bound it,
        False when the expression has no single unknown or several values give ``size`` (a floor).
        Raises InputContractError when no value gives ``size`` (a 24-pixel side for ``16*h16``):
        the range check alone let that reach native code."""
        unknown = sorted(_symexpr.free_symbols(d.expr) - set(values))
        if len(unknown) != 1:
            return False
        sym = unknown[0]
        fn = _symexpr.compile_expr(d.expr)
        try:
            slope = [fn({**values, sym: v}) for v in (1, 2, 3)]
        except _symexpr.ExprError:
            slope = [0, 0, 1]
        if slope[1] - slope[0] == slope[2] - slope[1] != 0:  # affine (8*k, k + 1): the exact inverse
            found = _symexpr.invert_affine(d.expr, sym, size, values, 0)
        else:  # a floor, a product: every small value, for uniqueness
            hits: list[int] = []
            for v in range(_SEARCH_LIMIT + 1):
                try:
                    if fn({**values, sym: v}) == size:
                        hits.append(v)
                except _symexpr.ExprError:
                    continue
                if len(hits) > 1:
                    return False
            found = hits[0] if hits else None
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
        return True

    def finish(self) -> None:
        """Bind every symbol a derived size determines, check every derived size, then run the
        deferred rules. Raises InputContractError for the first violation, or ``input.unchecked``
        for a rule that no binding lets evaluate."""
        if not self.pending and not self.deferred:
            return
        values = {k: v[0] for k, v in self.symbols.items()}
        todo = list(self.pending)
        while todo:  # each pass binds what the sizes of the last one made solvable (2*a + b, then 8*a)
            left = []
            for entry in todo:
                name, i, d, fn, size = entry
                try:
                    want = fn(values)
                except _symexpr.ExprError:
                    if not self._solve(name, i, d, size, values):
                        left.append(entry)
                    continue
                if want != size:
                    raise InputContractError(
                        f"{name}: dim {i} is {size}, but {d.expr!r} is {want} here",
                        code="input.range",
                        argument=name,
                        expected=f"{d.expr} = {want}",
                        found=str(size),
                    )
            if len(left) == len(todo):
                name, i, d, _, size = left[0]
                unknown = ", ".join(sorted(_symexpr.free_symbols(d.expr) - set(values)))
                raise _unchecked(name, f"dim {i} ({size}, contract {d.expr!r})", f"no input determines {unknown}")
            todo = left
        for name, what, rule in self.deferred:
            try:
                rule(values)
            except _symexpr.ExprError as exc:
                raise _unchecked(name, what, str(exc)) from None


def _unchecked(name: str, what: str, why: str) -> InputContractError:
    return InputContractError(
        f"{name}: its {what} could not be checked against the contract ({why}); refused rather than passed unchecked",
        code="input.unchecked",
        argument=name,
        expected="a rule that can be evaluated",
        found=why,
        hint="the manifest's expressions need symbols this call does not determine: pass every input of the contract, "
        "or rebuild with dynamic dims that an input carries plainly",
    )
