"""The model's own checks on input values, read off the exported program (issue 42).

``b = x.item(); torch._check(b < y.shape[0]); return y[:b]``: export binds ``b`` to an unbacked
symbol (``u0``) at an ``aten.item`` node and keeps the check as a deferred runtime assert
(``aten._assert_scalar`` over ``u0 < s17``), which AOTInductor compiles into the package: a call
that breaks it stops in native code with torch's internal symbols. Here each such assert becomes a
``DataCheck`` over the contract's symbols (``u0 < n``), in the user's words (``x's value must be <
y.shape[0]``), and the symbol is marked as ``x``'s value (``Symbol.value_of``): the golden samples
are generated to satisfy the checks (builder/golden.py), and the guarded loader refuses a call
that breaks one before native code runs (runtime_probe/guard/data_checks.py).

Covered: a symbol that is the value of a one-element tensor input (``x.item()``, ``int(x)``), and
asserts over such symbols and the input sizes. Not covered (left to the package's own assert, with
torch's words): a value computed first (``x.sum().item()``, ``nonzero()``'s count), which only
running the model can give.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import DataCheck, Dim, IOContract, Symbol

__all__ = ["read_data_checks"]

_READS = ("aten.item.default", "aten._local_scalar_dense.default")
_OPS = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "must equal", "!=": "must differ from"}


def read_data_checks(ep: Any, contract: IOContract) -> IOContract:
    """``contract`` with its value symbols marked and the data-dependent asserts of ``ep``
    recorded (unchanged when it has none)."""
    values = _value_symbols(ep, contract)
    if not values:
        return contract
    rename = {**_size_symbols(ep, contract), **{u: u for u in values}}
    words = {
        **{s: _size_words(contract, name) for s, name in rename.items() if s not in values},
        **{u: f"{x}'s value" for u, x in values.items()},
    }
    checks = []
    for text, expr in _asserts(ep):
        free = {str(f) for f in expr.free_symbols}
        if not free & set(values) or not free <= set(rename):
            continue
        check = _check(text, expr, rename, words, values, contract)
        if check is not None:
            checks.append(check)
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    dtypes = {i.name: i.tensor.dtype for i in contract.inputs if i.tensor is not None}
    symbols = [s for s in contract.symbols if s.name not in values]
    for u, x in values.items():
        # its range as export knows it; unbounded below (no torch._check_is_size): the dtype's least
        # value, not the 0 a size would get (y[:b] takes a negative b)
        vr = ranges.get(u)
        lo = int(vr.lower) if vr is not None and getattr(vr.lower, "is_Integer", False) else _least(dtypes[x])
        hi = int(vr.upper) if vr is not None and getattr(vr.upper, "is_Integer", False) else None
        symbols.append(Symbol(u, lo, hi, (), value_of=x))
    return dataclasses.replace(contract, symbols=tuple(symbols), data_checks=tuple(checks) or None)


def _least(dtype: str) -> int:
    """The least value of an integer dtype (``int64``: -2**63; unsigned and bool: 0)."""
    bits = re.fullmatch(r"int(\d+)", dtype)
    return -(2 ** (int(bits.group(1)) - 1)) if bits else 0


def _user_placeholders(ep: Any, contract: IOContract) -> dict[str, str]:
    """Placeholder name -> the contract's tensor input leaf it is (in order)."""
    import torch

    kinds = torch.export.graph_signature.InputKind
    names = [getattr(s.arg, "name", "") for s in ep.graph_signature.input_specs if s.kind == kinds.USER_INPUT]
    tensors = [i.name for i in contract.inputs if i.kind == "tensor"]
    nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    tensor_names = [n for n in names if isinstance(nodes.get(n) and nodes[n].meta.get("val"), torch.Tensor)]
    return dict(zip(tensor_names, tensors))


def _value_symbols(ep: Any, contract: IOContract) -> dict[str, str]:
    """Unbacked symbol -> the input leaf whose value it is: an ``item`` of a one-element input."""
    import torch

    leaves = _user_placeholders(ep, contract)
    out: dict[str, str] = {}
    for node in ep.graph.nodes:
        if node.op != "call_function" or str(node.target) not in _READS or not node.args:
            continue
        src = node.args[0]
        val = node.meta.get("val")
        if getattr(src, "op", None) != "placeholder" or src.name not in leaves or not isinstance(val, torch.SymInt):
            continue
        sym = str(val.node.expr)
        fake = src.meta.get("val")
        if re.fullmatch(r"u\d+", sym) and isinstance(fake, torch.Tensor) and fake.numel() == 1 and not fake.dtype.is_floating_point:
            out.setdefault(sym, leaves[src.name])
    return out


def _size_symbols(ep: Any, contract: IOContract) -> dict[str, str]:
    """torch's symbol of an input size -> the contract's (``s17`` -> ``n``)."""
    import torch

    leaves = _user_placeholders(ep, contract)
    specs = {i.name: i.tensor for i in contract.inputs if i.tensor is not None}
    out: dict[str, str] = {}
    for node in ep.graph.nodes:
        t = specs.get(leaves.get(node.name, ""))
        fake = node.meta.get("val") if node.op == "placeholder" else None
        if t is None or not isinstance(fake, torch.Tensor):
            continue
        for size, dim in zip(fake.shape, t.shape):
            if isinstance(size, torch.SymInt) and isinstance(dim, Dim) and _symexpr.is_symbol(dim.expr):
                out.setdefault(str(size.node.expr), dim.expr)
    return out


def _size_words(contract: IOContract, name: str) -> str:
    sym = next((s for s in contract.symbols if s.name == name), None)
    return sym.sources[0] if sym is not None and sym.sources else name


def _asserts(ep: Any) -> list[tuple[str, Any]]:
    """(torch's text, the sympy condition) of each deferred runtime assert in the graph."""
    out = []
    for node in ep.graph.nodes:
        if node.op == "call_function" and "_assert_scalar" in str(node.target) and node.args:
            cond = getattr(node.args[0], "meta", {}).get("val")
            expr = getattr(getattr(cond, "node", None), "expr", None)
            if expr is not None and getattr(expr, "free_symbols", None):
                out.append((str(expr), expr))
    return out


def _check(
    text: str, expr: Any, rename: Mapping[str, str], words: Mapping[str, str], values: Mapping[str, str], contract: IOContract
) -> DataCheck | None:
    """The assert over the contract's symbols and in words; None when it does not translate into
    the condition grammar (the package's own assert still stops such a call)."""
    import sympy  # type: ignore[import-untyped]

    def over(mapping: Mapping[str, str], e: Any) -> str:
        return str(e.xreplace({f: sympy.Symbol(mapping[str(f)]) for f in e.free_symbols}))

    rel = {
        sympy.StrictLessThan: "<",
        sympy.LessThan: "<=",
        sympy.StrictGreaterThan: ">",
        sympy.GreaterThan: ">=",
        sympy.Equality: "==",
        sympy.Unequality: "!=",
    }
    op = rel.get(type(expr))
    if op is None:
        return None
    cond = f"{over(rename, expr.lhs)} {op} {over(rename, expr.rhs)}"
    try:
        _symexpr.compile_condition(cond)
    except _symexpr.ExprError:
        return None
    said = _OPS[op] if op in ("==", "!=") else f"must be {op}"
    free = {str(f) for f in expr.free_symbols}
    sizes = [s for s in contract.symbols if s.name in {rename[f] for f in free if f not in values}]
    arguments = [values[f] for f in sorted(free) if f in values] + [src.split(".")[0] for s in sizes for src in s.sources[:1]]
    return DataCheck(text, cond, f"{over(words, expr.lhs)} {said} {over(words, expr.rhs)}", tuple(dict.fromkeys(arguments)))
