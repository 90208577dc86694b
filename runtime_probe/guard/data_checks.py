"""The model's own checks on input values (``IOContract.data_checks``), checked on every call once
every symbol is bound, BEFORE native code runs.

``b = x.item(); torch._check(b < y.shape[0]); return y[:b]``: export turns the check into a
runtime assert over internal symbols, and the compiled package refuses a call that breaks it with
torch's words (``Expected u0 < s17 but received 3``). The build records each one over the
contract's symbols, with the input whose value a symbol is (``Symbol.value_of``: the "value" rule
of rules.py reads it, ``x.item()``, one device sync per call, for such contracts only); this
module raises ``input.data_check`` in the user's words: ``x's value must be < y.shape[0]: found
x=4, y.shape[0]=3``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.guard.fastsource import FastSource, emit_condition
from runtime_probe.guard.rule_types import Leaf, Rule
from runtime_probe.package.manifest import DataCheck, IOContract
from runtime_probe.reporting.errors import InputContractError

if TYPE_CHECKING:
    from runtime_probe.guard.env import Env

__all__ = ["compile_data_checks", "describe", "fast_data_lines", "value_fast", "value_rule", "value_symbols"]

_HINT = (
    "the model checks this itself (torch._check in its code); the compiled package would stop on it with torch's "
    "internal names. Pass values that satisfy it"
)


def value_symbols(contract: IOContract) -> dict[str, str]:
    """Input leaf name -> the symbol its value gives (``x`` -> ``u0``), for the data checks."""
    return {s.value_of: s.name for s in contract.symbols if s.value_of is not None}


def describe(symbol: str, env: Env, values: dict[str, int]) -> str:
    """``x=4`` for a symbol an input's value gives, ``y.shape[0]=3`` for a size."""
    bound = env.symbols.get(symbol)
    if bound is None:
        return f"{symbol}={values[symbol]}"
    where = bound[1] if bound[2] is None else f"{bound[1]}.shape[{bound[2]}]"
    return f"{where}={values[symbol]}"


def compile_data_checks(contract: IOContract) -> Callable[[Env], None] | None:
    """The check of every data check (and every value symbol's range) of ``contract``, after
    ``Env.finish``; None when it has none."""
    ranges = [(s.name, s.value_of, s.min, s.max) for s in contract.symbols if s.value_of is not None]
    compiled: list[tuple[DataCheck, _symexpr.Cond | None, list[str]]] = []
    for c in contract.data_checks or ():
        try:
            compiled.append((c, _symexpr.compile_condition(c.expr), _in_order(c.expr)))
        except _symexpr.ExprError:
            compiled.append((c, None, []))
    if not compiled and not ranges:
        return None

    def check_data(env: Env) -> None:
        values = {k: v[0] for k, v in env.symbols.items()}
        for symbol, leaf, lo, hi in ranges:
            v = values.get(symbol)
            if v is not None and (v < lo or (hi is not None and v > hi)):
                raise InputContractError(
                    f"{leaf}'s value must be in {lo}..{'' if hi is None else hi}: found {leaf}={v}",
                    code="input.data_check",
                    argument=leaf,
                    expected=f"{lo} <= {symbol}" + (f" <= {hi}" if hi is not None else ""),
                    found=str(v),
                    hint=_HINT,
                )
        for c, cond, names in compiled:
            missing = [n for n in names if n not in values]
            if cond is None or missing:
                why = f"no input gave {', '.join(missing)} a value" if missing else "its expression is outside the condition grammar"
                raise _unchecked(c, why)
            try:
                held = cond(values)
            except _symexpr.ExprError as exc:
                raise _unchecked(c, str(exc)) from None
            if not held:
                found = ", ".join(describe(n, env, values) for n in names)
                raise InputContractError(
                    f"{c.words}: found {found}",
                    code="input.data_check",
                    argument=", ".join(c.arguments) or None,
                    expected=c.expr,
                    found=found,
                    hint=_HINT,
                )

    return check_data


def _in_order(expr: str) -> list[str]:
    """The symbols of ``expr`` in the order they appear (``u0 < n``: the value, then the size)."""
    free = _symexpr.free_symbols(expr)
    return list(dict.fromkeys(m.group(0) for m in re.finditer(r"[A-Za-z_]\w*", expr) if m.group(0) in free))


def _unchecked(c: DataCheck, why: str) -> InputContractError:
    return InputContractError(
        f"the model's check {c.words!r} cannot be evaluated ({why}); the call is refused rather than run unchecked",
        code="input.data_check",
        argument=", ".join(c.arguments) or None,
        expected=c.expr,
        found="not checkable",
        hint="rebuild the package with this aoti-guard",
    )


def fast_data_lines(contract: IOContract, src: FastSource) -> list[str]:
    """The fast form: each check over the bound symbols' variables (NoFastForm when one is not
    bound by a plain size or a value)."""
    lines = []
    for s in contract.symbols:
        if s.value_of is not None and s.name in src.symbols:
            high = f" or {src.symbols[s.name]} > {int(s.max)}" if s.max is not None else ""
            lines.append(f"if {src.symbols[s.name]} < {int(s.min)}{high}: return None")
    return lines + [f"if not {emit_condition(c.expr, src)}: return None" for c in contract.data_checks or ()]


# -- the leaf's half: the value a check reads (rules.RULES, "value") ------------------------------


def value_rule(leaf: Leaf) -> Rule | None:
    """The symbol a model's check on values reads (``b = x.item()``): bound from the value, within
    the symbol's range once every symbol is bound (``data_checks``). Reading it costs a device
    sync, for contracts with such a check only."""
    symbol = leaf.reads
    if symbol is None:
        return None
    name = leaf.name

    def check_value(value: Any, shape: Any, env: Env) -> None:
        env.symbols[symbol] = (int(value.item()), name, None)

    return check_value


def value_fast(leaf: Leaf, src: FastSource) -> list[str]:
    if leaf.reads is None:
        return []
    return [f"{src.bind(leaf.reads)} = int({leaf.name}.item())"]
