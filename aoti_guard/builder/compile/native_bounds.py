"""The ranges AOTInductor's own input checks enforce, read from the generated wrapper, against the
contract's.

Inductor may narrow a dynamic dimension while it compiles: on CPU, the fake kernel of a
convolution asks ``batch >= 16`` (its backend choice), the question is answered False without a
guard ("Ignored guard s77 >= 16 == False") and the symbol's range becomes ``[2, 15]``. The
package then refuses a batch of 16 under ``AOTI_RUNTIME_CHECK_INPUTS=1`` (``input_handles[0]: dim
value is too large at 0, expected to be <= 15``), which the probe and the build's validation
use, although the export said 1..16. The compiled code is only vouched for inside the narrowed
range, so the contract follows it, and the build says so (``build.range_narrowed``) instead of
failing on the boundary sample or recording a range the package does not accept.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.formats.wrapper_cpp import SizeCheck
from runtime_probe.package.manifest import Dim, IOContract, Symbol
from runtime_probe.reporting.findings import Finding, warning

__all__ = ["narrow_contract"]  # the bounds themselves: runtime_probe.formats.wrapper_cpp.size_checks

_SEARCH_LIMIT = 1_000_000


def _narrowed(sym: Symbol, expr: str, bound: SizeCheck) -> int | None:
    """The symbol's new max (or min) so that ``expr`` stays within ``bound``; None if unchanged."""
    fn = _symexpr.compile_expr(expr)
    hi = sym.max if sym.max is not None else sym.min + _SEARCH_LIMIT

    def at(v: int) -> int:
        return int(fn({sym.name: v}))

    if bound.kind == "max":
        if at(hi) <= bound.value:
            return None
        v = hi
        while v > sym.min and at(v) > bound.value and hi - v < _SEARCH_LIMIT:
            v -= 1
        return v
    if at(sym.min) >= bound.value:
        return None
    v = sym.min
    while v < hi and at(v) < bound.value and v - sym.min < _SEARCH_LIMIT:
        v += 1
    return v


def narrow_contract(contract: IOContract, bounds: list[SizeCheck], label: str = "the model") -> tuple[IOContract, list[Finding]]:
    """The contract with each symbol's range cut to what the compiled checks accept, and a
    ``build.range_narrowed`` warning for each symbol cut."""
    tensors = contract.tensor_inputs()
    symbols: dict[str, Symbol] = {s.name: s for s in contract.symbols}
    reasons: dict[str, list[str]] = {}
    for b in bounds:
        if not 0 <= b.input_index < len(tensors):
            continue
        spec = tensors[b.input_index]
        if spec.tensor is None or b.dim >= len(spec.tensor.shape):
            continue
        dim = spec.tensor.shape[b.dim]
        if not isinstance(dim, Dim):
            continue
        free = sorted(_symexpr.free_symbols(dim.expr))
        if len(free) != 1 or free[0] not in symbols:
            continue  # a size over several symbols: the boundary samples will show it
        sym = symbols[free[0]]
        try:
            new = _narrowed(sym, dim.expr, b)
        except (_symexpr.ExprError, ZeroDivisionError, ValueError):
            continue
        if new is None:
            continue
        what = f"{spec.name} dim {b.dim} ({dim.expr}) {'<=' if b.kind == 'max' else '>='} {b.value}"
        if b.kind == "max" and (sym.max is None or new < sym.max):
            reasons.setdefault(sym.name, []).append(f"max {sym.max} -> {new}: {what}")
            symbols[sym.name] = dataclasses.replace(sym, max=max(new, sym.min))
        elif b.kind == "min" and new > sym.min:
            reasons.setdefault(sym.name, []).append(f"min {sym.min} -> {new}: {what}")
            symbols[sym.name] = dataclasses.replace(sym, min=new)
    if not reasons:
        return contract, []
    findings = []
    for name, why in reasons.items():
        old, new_sym = next(s for s in contract.symbols if s.name == name), symbols[name]
        findings.append(
            warning(
                "build.range_narrowed",
                "compile",
                f"AOTInductor narrowed {name} from {old.min}..{old.max} to {new_sym.min}..{new_sym.max} while compiling {label}: "
                f"its own input checks accept only {'; '.join(why)}. The package's contract, golden samples and guard use "
                f"{new_sym.min}..{new_sym.max}",
                expected=f"{name} {old.min}..{old.max} (the export's range)",
                found=f"{name} {new_sym.min}..{new_sym.max} (the compiled checks)",
                hint=f"serve {name} within {new_sym.min}..{new_sym.max}; Inductor answered a size question of a kernel "
                "(e.g. a CPU convolution's backend choice at batch 16) for the example's side only, so the code past it is "
                f"not vouched for. To serve more, make {name}'s range lie on one side of that size (export it with "
                "a larger minimum, or as a separate package)",
                evidence={"symbol": name, "export": [old.min, old.max], "compiled": [new_sym.min, new_sym.max], "checks": why},
            )
        )
    return _with_symbols(contract, symbols), findings


def _with_symbols(contract: IOContract, symbols: dict[str, Symbol]) -> IOContract:
    """The contract with new symbol ranges, and each size over one of them re-bounded (a size's
    min/max are its expression at the symbol's ends: the sizes are monotonic in their symbol)."""

    def dim(d: int | Dim) -> int | Dim:
        if not isinstance(d, Dim):
            return d
        free = _symexpr.free_symbols(d.expr)
        if len(free) != 1:
            return d
        sym = symbols.get(next(iter(free)))
        if sym is None or sym.max is None:
            return d
        try:
            fn = _symexpr.compile_expr(d.expr)
            ends = [int(fn({sym.name: sym.min})), int(fn({sym.name: sym.max}))]
        except (_symexpr.ExprError, ZeroDivisionError, ValueError):
            return d
        return dataclasses.replace(d, min=min(ends), max=max(ends))

    def io(spec: Any) -> Any:
        if spec.tensor is None:
            return spec
        return dataclasses.replace(spec, tensor=dataclasses.replace(spec.tensor, shape=tuple(dim(d) for d in spec.tensor.shape)))

    return dataclasses.replace(
        contract,
        symbols=tuple(symbols[s.name] for s in contract.symbols),
        inputs=tuple(io(i) for i in contract.inputs),
        outputs=tuple(io(o) for o in contract.outputs),
    )
