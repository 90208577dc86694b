"""Whether a shape guard holds on every size the user declared, by interval arithmetic.

torch.export writes guards such as ``seq*Max(1, 8 + past + seq - ((past + seq) % 8)) > 1`` (a
transformers decoder with a cache, on CUDA, where sizes are multiples of 8). sympy cannot simplify
``Max`` over ``Mod``, and two ranges of 1..256 are too many points to try one by one; the build
then called a guard that every declared size satisfies an assumption that pins the model
(``build.export_specialized``): a false refusal. Bounds carried through the expression decide it:
``Mod(x, 8)`` lies in 0..7, so the ``Max`` is at least 3 and the product at least 3 > 1.

Sound, not complete: True only when the bounds prove the guard; False means "not proven" (the
caller then tries other ways, or reports the guard). Each variable is treated as independent of
the others, which can only widen a bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["holds_on_ranges", "interval"]

Interval = tuple[float, float]  # (lo, hi); math.inf for no upper bound


class _Unknown(Exception):
    """An expression this module has no bound for."""


def holds_on_ranges(cond: Any, bounds: Mapping[Any, tuple[int, int | None]]) -> bool:
    """True when ``cond`` (a sympy relation, And/Or of them, or a boolean) holds for every value of
    its symbols within ``bounds`` ({symbol: (lo, hi or None)})."""
    try:
        return _holds(cond, bounds)
    except (_Unknown, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return False


def interval(expr: Any, bounds: Mapping[Any, tuple[int, int | None]]) -> Interval:
    """The range of an integer-valued sympy expression over ``bounds``; raises _Unknown."""
    import sympy  # type: ignore[import-untyped]

    if expr.is_Integer or expr.is_Rational:
        v = float(expr)
        return v, v
    if expr.is_Symbol:
        if expr not in bounds:
            raise _Unknown(str(expr))
        low, high = bounds[expr]
        return float(low), (math.inf if high is None else float(high))
    if isinstance(expr, sympy.Add):
        parts = [interval(a, bounds) for a in expr.args]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if isinstance(expr, sympy.Mul):
        product: Interval = (1.0, 1.0)
        for a in expr.args:
            product = _times(product, interval(a, bounds))
        return product
    if isinstance(expr, sympy.Max):
        parts = [interval(a, bounds) for a in expr.args]
        return max(p[0] for p in parts), max(p[1] for p in parts)
    if isinstance(expr, sympy.Min):
        parts = [interval(a, bounds) for a in expr.args]
        return min(p[0] for p in parts), min(p[1] for p in parts)
    if isinstance(expr, sympy.Mod):
        x, m = (interval(a, bounds) for a in expr.args)
        if m[0] != m[1] or m[0] <= 0:
            raise _Unknown(str(expr))  # only a positive constant modulus
        if x[0] >= 0 and x[1] < m[0]:
            return x  # already below the modulus
        return 0.0, m[0] - 1
    if isinstance(expr, sympy.floor):
        inner = interval(expr.args[0], bounds)
        return float(math.floor(inner[0])), (math.inf if inner[1] == math.inf else float(math.floor(inner[1])))
    if isinstance(expr, sympy.Pow) and expr.exp == -1:  # inside floor(a / b): b a positive constant
        b = interval(expr.base, bounds)
        if b[0] != b[1] or b[0] <= 0:
            raise _Unknown(str(expr))
        return 1.0 / b[0], 1.0 / b[0]
    raise _Unknown(type(expr).__name__)


def _times(a: Interval, b: Interval) -> Interval:
    products = [_mul(x, y) for x in a for y in b]
    return min(products), max(products)


def _mul(x: float, y: float) -> float:
    if x == 0 or y == 0:
        return 0.0  # 0 * inf is 0 here: a bound of 0 is exact
    return x * y


def _holds(cond: Any, bounds: Mapping[Any, tuple[int, int | None]]) -> bool:
    import sympy

    if cond is sympy.true:
        return True
    if cond is sympy.false:
        return False
    if isinstance(cond, sympy.And):
        return all(_holds(c, bounds) for c in cond.args)
    if isinstance(cond, sympy.Or):
        return any(_holds(c, bounds) for c in cond.args)  # sufficient, not necessary
    if isinstance(cond, (sympy.StrictGreaterThan, sympy.GreaterThan, sympy.StrictLessThan, sympy.LessThan, sympy.Eq, sympy.Ne)):
        lo, hi = interval(cond.lhs - cond.rhs, bounds)
        if isinstance(cond, sympy.StrictGreaterThan):
            return lo > 0
        if isinstance(cond, sympy.GreaterThan):
            return lo >= 0
        if isinstance(cond, sympy.StrictLessThan):
            return hi < 0
        if isinstance(cond, sympy.LessThan):
            return hi <= 0
        if isinstance(cond, sympy.Eq):
            return lo == hi == 0
        return lo > 0 or hi < 0  # Ne
    raise _Unknown(type(cond).__name__)
