"""Writing the fast path's source (fastpath.py): what every rule's fast form shares while one
contract's function is written, and the translation of a size expression or condition into Python.

A leaf: rules.py (each rule's fast form) and shape_guards.py import it, fastpath.py assembles
their lines. Only parameter names (checked as identifiers), local variables named here and
integers are written into the source; any other value is put into ``globals`` under a name that
starts with ``PREFIX``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.formats import symexpr as _symexpr

__all__ = ["PREFIX", "FastSource", "NoFastForm", "emit_condition", "emit_expr", "shape_var"]

PREFIX = "_aoti_guard_"  # globals and locals of the generated code; a parameter may not start with it

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def shape_var(name: str) -> str:
    """The local variable holding parameter ``name``'s shape (the "what" rule binds it)."""
    return f"{PREFIX}S_{name}"


class NoFastForm(Exception):
    """A rule the fast path cannot express for this contract: every call takes the diagnosing path."""


@dataclass
class FastSource:
    """One contract's generated function while it is written.

    ``globals``: the values its source refers to by name; ``symbols``: each contract symbol bound
    so far -> the local variable holding its value (a later leaf compares against it); ``tail``:
    what writes the lines that run after every leaf's (a derived size needs symbols a later input
    binds)."""

    globals: dict[str, Any] = field(default_factory=dict)
    symbols: dict[str, str] = field(default_factory=dict)
    tail: list[Callable[[FastSource], list[str]]] = field(default_factory=list)
    _count: int = 0

    def name(self) -> str:
        """A fresh local variable's name."""
        self._count += 1
        return f"{PREFIX}{self._count}"

    def const(self, value: Any) -> str:
        """The name of a new global holding ``value``."""
        name = self.name()
        self.globals[name] = value
        return name

    def later(self, lines: Callable[[FastSource], list[str]]) -> None:
        """Write ``lines(self)`` after every leaf's lines (when every symbol an input carries is bound)."""
        self.tail.append(lines)

    def bind(self, symbol: str) -> str:
        """The local variable of a symbol this line is the first to bind."""
        var = self.symbols[symbol] = self.name()
        return var


def emit_expr(expr: str, src: FastSource) -> str:
    """Python source computing the size expression ``expr`` from the bound symbols' variables:
    written out where the grammar's operators mean the same in Python (a division by zero raises,
    and the caller then takes the diagnosing path), else a call of its compiled function.
    Raises NoFastForm when a symbol is not bound yet or ``expr`` is outside the grammar."""
    return _emit_or_call(expr, src, _symexpr.compile_expr)


def emit_condition(expr: str, src: FastSource) -> str:
    """As ``emit_expr``, for a condition (``h*w == 64``, ``u0 < n``)."""
    return _emit_or_call(expr, src, _symexpr.compile_condition)


def _emit_or_call(expr: str, src: FastSource, compiler: Callable[[str], Any]) -> str:
    try:
        node = ast.parse(expr, mode="eval").body
        fn = compiler(expr)
        names = sorted(_symexpr.free_symbols(expr))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise NoFastForm(expr) from None
    if any(n not in src.symbols for n in names):
        raise NoFastForm(expr)
    try:
        return _emit(node, src.symbols, 0)
    except NoFastForm:
        mapping = "{" + ", ".join(f"{n!r}: {src.symbols[n]}" for n in names) + "}"
        return f"{src.const(fn)}({mapping})"


def _emit(node: ast.expr, symbols: Mapping[str, str], depth: int) -> str:
    if depth > 50:
        raise NoFastForm("nested too deeply")
    if isinstance(node, ast.Constant) and type(node.value) in (int, bool):
        return str(int(node.value)) if type(node.value) is int else str(node.value)
    if isinstance(node, ast.Name) and node.id in symbols:
        return symbols[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        return f"({'-' if isinstance(node.op, ast.USub) else 'not '}{_emit(node.operand, symbols, depth + 1)})"
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return f"({_emit(node.left, symbols, depth + 1)} {_BINOPS[type(node.op)]} {_emit(node.right, symbols, depth + 1)})"
    if isinstance(node, ast.Compare) and node.ops and all(type(op) in _COMPARE for op in node.ops):
        parts = [_emit(node.left, symbols, depth + 1)]
        for op, right in zip(node.ops, node.comparators):
            parts += [_COMPARE[type(op)], _emit(right, symbols, depth + 1)]
        return "(" + " ".join(parts) + ")"
    if isinstance(node, ast.BoolOp) and isinstance(node.op, (ast.And, ast.Or)):
        joiner = " and " if isinstance(node.op, ast.And) else " or "
        return "(" + joiner.join(_emit(v, symbols, depth + 1) for v in node.values) + ")"
    raise NoFastForm(ast.dump(node)[:60])
