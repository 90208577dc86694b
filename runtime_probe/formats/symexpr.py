"""Size expressions over the contract's symbols (``batch``, ``2*batch``, ``(s0//2) + 1``).

The manifest stores sizes and strides as sympy-printed strings. Here they are parsed with ``ast``
into small closures: no ``eval``, only integer arithmetic and the few functions sympy prints for
sizes. An expression outside that grammar is reported as unsupported, never executed.

Conditions (``h*w == 64``, ``s0 != 1 and s0 % 8 == 0``: torch.export's shape guards, translated
into the contract's symbols) are compiled by ``compile_condition``: comparisons (``==``, ``!=``,
``<``, ``<=``, ``>``, ``>=``, chained as in Python) between sizes, joined by ``and`` / ``or`` /
``not``. A size expression stays arithmetic only: ``compile_expr`` refuses a comparison.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping

__all__ = ["ExprError", "compile_condition", "compile_expr", "free_symbols", "invert_affine", "is_symbol", "solve_for"]

Env = Mapping[str, int]
Fn = Callable[[Env], int]
Cond = Callable[[Env], bool]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MAX_LEN = 2000
_MAX_POWER = 8
# Every value a size expression computes stays within 64 bits (torch's sizes are int64): without
# a bound, ``((x**8)**8)**8...`` in a manifest, 120 characters, made the evaluation of x=2 run
# out of time and memory (2**(8**12)), in the probe or the guarded loader.
_LIMIT = 2**64


def _checked(value: int) -> int:
    if not -_LIMIT <= value <= _LIMIT:
        raise ExprError("a size expression's value goes beyond 64 bits")
    return value


class ExprError(ValueError):
    pass


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("division by zero")
    return a // b


def _ceildiv(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("division by zero")
    return -(-a // b)


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise ExprError("modulo by zero")
    return a % b


_BINOPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: _floordiv,
    ast.Mod: _mod,
}
_CALLS: dict[str, Callable[..., int]] = {
    "Max": max,
    "Min": min,
    "FloorDiv": _floordiv,
    "CeilDiv": _ceildiv,
    "CleanDiv": _floordiv,
    "IntTrueDiv": _floordiv,
    "Mod": _mod,
    "PythonMod": _mod,
    "ModularIndexing": lambda x, d, m: _mod(_floordiv(x, d), m),
}


def is_symbol(expr: str) -> bool:
    return bool(_IDENT.match(expr)) and expr not in _CALLS


def free_symbols(expr: str) -> set[str]:
    return {n.id for n in ast.walk(_parse(expr)) if isinstance(n, ast.Name) and n.id not in _CALLS}


def _parse(expr: str) -> ast.expr:
    if len(expr) > _MAX_LEN:
        raise ExprError("expression too long")
    try:
        return ast.parse(expr, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ExprError(f"cannot parse size expression {expr[:80]!r}") from None


def compile_expr(expr: str | int) -> Fn:
    """Compile ``expr`` into ``fn(env) -> int``. Raises ExprError for anything outside the grammar."""
    if isinstance(expr, int):
        value = expr
        return lambda env: value
    return _compile(_parse(expr), 0)


def _compile(node: ast.expr, depth: int) -> Fn:
    if depth > 50:
        raise ExprError("expression nested too deeply")
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        value = _checked(node.value)
        return lambda env: value
    if isinstance(node, ast.Name):
        name = node.id

        def lookup(env: Env) -> int:
            try:
                return env[name]
            except KeyError:
                raise ExprError(f"symbol {name} has no value") from None

        return lookup
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _compile(node.operand, depth + 1)
        return lambda env: -inner(env)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        # sympy prints a square image's strides as 768*h16**2: a small constant exponent only
        power = node.right
        if not (isinstance(power, ast.Constant) and type(power.value) is int and 0 <= power.value <= _MAX_POWER):
            raise ExprError(f"unsupported exponent {ast.dump(power)[:40]} (a constant 0..{_MAX_POWER} only)")
        base, n = _compile(node.left, depth + 1), power.value
        return lambda env: _checked(_checked(int(base(env))) ** n)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        op = _BINOPS[type(node.op)]
        left, right = _compile(node.left, depth + 1), _compile(node.right, depth + 1)
        return lambda env: _checked(op(left(env), right(env)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS and not node.keywords:
        fn = _CALLS[node.func.id]
        args = [_compile(a, depth + 1) for a in node.args]
        return lambda env: fn(*(a(env) for a in args))
    raise ExprError(f"unsupported size expression element {ast.dump(node)[:80]}")


_COMPARE: dict[type, Callable[[int, int], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def compile_condition(expr: str) -> Cond:
    """Compile a condition over sizes into ``fn(env) -> bool``: comparisons of size expressions
    joined by ``and``/``or``/``not`` (and the literals ``True``/``False``). Raises ExprError for
    anything outside that grammar, never evaluates it."""
    if not isinstance(expr, str):
        raise ExprError(f"a condition must be a string, not {type(expr).__name__}")
    return _compile_bool(_parse(expr), 0)


def _compile_bool(node: ast.expr, depth: int) -> Cond:
    if depth > 50:
        raise ExprError("condition nested too deeply")
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        flag = node.value
        return lambda env: flag
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _compile_bool(node.operand, depth + 1)
        return lambda env: not inner(env)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, (ast.And, ast.Or)):
        parts = [_compile_bool(v, depth + 1) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda env: all(p(env) for p in parts)
        return lambda env: any(p(env) for p in parts)
    if isinstance(node, ast.Compare) and node.ops and all(type(op) in _COMPARE for op in node.ops):
        terms = [_compile(node.left, depth + 1)] + [_compile(c, depth + 1) for c in node.comparators]
        ops = [_COMPARE[type(op)] for op in node.ops]

        def compare(env: Env) -> bool:
            left = terms[0](env)
            for op, term in zip(ops, terms[1:]):
                right = term(env)
                if not op(left, right):
                    return False
                left = right
            return True

        return compare
    raise ExprError(f"unsupported condition element {ast.dump(node)[:80]}")


def solve_for(expr: str, name: str, size: int, known: Env, lo: int = 0, hi: int | None = None) -> int | None:
    """The value of ``name`` (from ``lo`` up; the search stops at ``hi``) that makes ``expr`` equal
    ``size`` (the other symbols from ``known``), or None when there is none.

    Affine expressions (``8*k``, ``k + 1``) are inverted from two evaluations (``invert_affine``).
    Anything else is searched over the range (small for real sizes). A ``size`` that an affine
    expression cannot reach (24 for ``16*k``) gives None.
    """
    try:
        fn = compile_expr(expr)
        guess = _affine_guess(fn, name, size, known, lo)
        if guess is not None:
            return guess
        top = hi if hi is not None else max(size, 1) * 2 + 2
        for v in range(lo, min(top, lo + 100_000) + 1):
            if int(fn({**known, name: v})) == size:
                return v
    except (ExprError, ZeroDivisionError, ValueError):
        return None
    return None


def invert_affine(expr: str, name: str, size: int, known: Env, lo: int = 0) -> int | None:
    """``solve_for`` without the search: the value of ``name`` (from ``lo`` up) that makes ``expr``
    equal ``size``, inverted from two evaluations and checked; None otherwise (an expression that
    is not affine gives None too)."""
    try:
        return _affine_guess(compile_expr(expr), name, size, known, lo)
    except (ExprError, ZeroDivisionError, ValueError):
        return None


def _affine_guess(fn: Fn, name: str, size: int, known: Env, lo: int) -> int | None:
    """The affine inverse's value of ``name`` when it is one (None otherwise); raises what ``fn`` raises."""

    def at(v: int) -> int:
        return int(fn({**known, name: v}))

    a, b = at(lo + 1) - at(lo), at(lo)
    if a != 0 and (size - b) % a == 0:
        guess = lo + (size - b) // a
        if guess >= lo and at(guess) == size:
            return guess
    return None
