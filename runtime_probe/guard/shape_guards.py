"""Export's shape guards (``IOContract.guards``), checked on every call once every symbol is bound.

torch.export records the conditions on sizes it assumed while tracing (``h*w == 64`` when the
model branches on it) and ``ExportedProgram.module()`` refuses a call that breaks one
(``Guard failed``); AOTInductor does not check them, so a bare package silently computes the
traced branch for every size. The build records each guard over the contract's symbols; this
module compiles them (runtime_probe/formats/symexpr.py's condition grammar: no ``eval``) into one
check that raises ``InputContractError`` with code ``input.guard``, naming the argument(s), the
guard in words and the sizes found.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.guard.fastsource import FastSource, NoFastForm, emit_condition
from runtime_probe.package.manifest import IOContract, ShapeGuard
from runtime_probe.reporting.errors import InputContractError

if TYPE_CHECKING:
    from runtime_probe.guard.env import Env

__all__ = ["GuardCheck", "compile_guards", "fast_guard_lines", "guard_left"]

GuardCheck = Callable[["Env"], None]
_HINT = (
    "torch.export traced the model for sizes where this holds; for other sizes eager takes another branch that the "
    "package does not have. Pass sizes that satisfy it, or rebuild the package so the export covers these sizes "
    "(an example that takes the general branch, torch._check, torch.cond, or static dims)"
)


def guard_left(expr: str) -> str | None:
    """The left side of a guard that is one comparison of a computed size (``h*w`` of
    ``h*w == 64``), whose value a message shows; None otherwise."""
    try:
        node = ast.parse(expr, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and not isinstance(node.left, (ast.Name, ast.Constant)):
        return ast.unparse(node.left).replace(" * ", "*").replace(" // ", "//")
    return None


class _Compiled:
    __slots__ = ("cond", "guard", "left", "symbols", "why")

    def __init__(self, guard: ShapeGuard) -> None:
        self.guard = guard
        self.cond: _symexpr.Cond | None = None
        self.left: _symexpr.Fn | None = None
        self.symbols: list[str] = []
        self.why = "torch's text could not be translated into the contract's symbols at build time"
        if guard.expr is None:
            return
        try:
            self.cond = _symexpr.compile_condition(guard.expr)
            self.symbols = sorted(_symexpr.free_symbols(guard.expr))
            left = guard_left(guard.expr)
            self.left = _symexpr.compile_expr(left) if left is not None else None
        except _symexpr.ExprError as exc:
            self.cond, self.why = None, f"its expression is outside the condition grammar ({exc})"


def compile_guards(contract: IOContract) -> GuardCheck | None:
    """The check of every guard of ``contract``, run after ``Env.finish`` (every symbol bound);
    None when the contract has none."""
    compiled = [_Compiled(g) for g in contract.guards or ()]
    if not compiled:
        return None

    def check_guards(env: Env) -> None:
        values = {k: v[0] for k, v in env.symbols.items()}
        for c in compiled:
            if c.cond is None:
                raise _unenforceable(c.guard, c.why)
            missing = [s for s in c.symbols if s not in values]
            if missing:
                raise _unenforceable(c.guard, f"no input gave {', '.join(missing)} a value")
            try:
                held = c.cond(values)
            except _symexpr.ExprError as exc:
                raise _unenforceable(c.guard, str(exc)) from None
            if not held:
                raise _violated(c, env, values)

    return check_guards


def _argument(guard: ShapeGuard) -> str | None:
    return ", ".join(guard.arguments) if guard.arguments else None


def _found(symbols: Sequence[str], env: Env, values: dict[str, int]) -> str:
    parts = []
    for s in symbols:
        bound = env.symbols.get(s)
        parts.append(f"{s}={values[s]}" + (f" ({bound[1]}.shape[{bound[2]}])" if bound is not None else ""))
    return ", ".join(parts)


def _violated(c: _Compiled, env: Env, values: dict[str, int]) -> InputContractError:
    g = c.guard
    found = _found(c.symbols, env, values)
    if c.left is not None:
        try:
            found += f" ({guard_left(g.expr or '')} = {c.left(values)})"
        except _symexpr.ExprError:
            pass
    who = _argument(g) or "input"
    return InputContractError(
        f"{who}: {g.words}, found {found}; the package was exported for that branch only",
        code="input.guard",
        argument=_argument(g),
        expected=g.expr,
        found=found,
        hint=_HINT,
    )


def _unenforceable(g: ShapeGuard, why: str) -> InputContractError:
    who = _argument(g) or "input"
    return InputContractError(
        f"{who}: the export guard {g.text!r} cannot be checked ({why}); the call is refused rather than run on a branch "
        "the package may not have",
        code="input.guard",
        argument=_argument(g),
        expected=g.expr or g.text,
        found="not checkable",
        hint="rebuild the package; aoti-guard build fails on a guard it cannot translate",
    )


# -- the fast form (fastpath.py) -------------------------------------------------------------------


def fast_guard_lines(contract: IOContract, src: FastSource) -> list[str]:
    """Lines of the generated fast path that return None (look closer) when a guard does not
    hold, over the variables of the bound symbols (fastsource.emit_condition). NoFastForm when a
    guard cannot be checked there at all (no expression, or a symbol no plain size binds): the
    contract then takes the diagnosing path."""
    lines: list[str] = []
    for g in contract.guards or ():
        if g.expr is None:
            raise NoFastForm(g.text)
        lines.append(f"if not {emit_condition(g.expr, src)}: return None")
    return lines
