"""Inputs for any aoti-guard package, made from its manifest's contract (so the benchmarks run on
a package given with --package, not only on the bundled example): each symbol at min(max, 8)
(at least its minimum), floats from randn, integers within their value range (or 0..1), bools
from rand > 0.5; contiguous, on the given device."""

from __future__ import annotations

import zipfile
from typing import Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim, Manifest, parse_manifest
from runtime_probe.runtime import layout

__all__ = ["call_spec", "make_call", "read_manifest"]


def read_manifest(package: str) -> Manifest:
    with zipfile.ZipFile(package) as zf:
        name = next(n for n in zf.namelist() if n.endswith(layout.MANIFEST))
        return parse_manifest(zf.read(name))


def call_spec(manifest: Manifest, batch: int = 8) -> dict[str, Any]:
    """A JSON-able recipe of one valid call: {"args": [...], "kwargs": {...}}, each leaf
    {"dtype", "shape", "range"} or {"value"} (flat parameters only)."""
    symbols = {s.name: max(s.min, min(batch, s.max if s.max is not None else batch)) for s in manifest.io.symbols}
    symbols = _satisfy_guards(manifest, symbols)
    leaves: dict[str, dict[str, Any]] = {}
    for spec in manifest.io.inputs:
        if spec.tensor is None:
            leaves[spec.param] = {"value": spec.value}
            continue
        shape = [d if isinstance(d, int) else _size(d, symbols) for d in spec.tensor.shape]
        leaves[spec.param] = {"dtype": spec.tensor.dtype, "shape": shape, "range": spec.tensor.value_range}
    params = [p for p in manifest.io.params if p.passed != "omitted"]
    return {
        "args": [leaves[p.name] for p in params if p.passed == "positional"],
        "kwargs": {p.name: leaves[p.name] for p in params if p.passed == "keyword"},
    }


def _satisfy_guards(manifest: Manifest, symbols: dict[str, int]) -> dict[str, int]:
    """The nearest symbol values that satisfy the contract's export guards (h*w == 64), as the
    build's golden samples do: a call that breaks one is refused (input.guard), not timed."""
    guards = [g for g in manifest.io.guards or () if g.expr is not None]
    if not guards:
        return symbols
    from aoti_guard.builder.golden import satisfy_guards

    bounds = {s.name: (s.min, s.max if s.max is not None else max(s.min, 4 * symbols[s.name])) for s in manifest.io.symbols}
    conds = [(g, _symexpr.compile_condition(g.expr or "")) for g in guards]
    return satisfy_guards(symbols, conds, bounds) or symbols


def _size(d: Dim, symbols: dict[str, int]) -> int:
    try:
        return int(_symexpr.compile_expr(d.expr)(symbols))
    except _symexpr.ExprError:
        return d.min


def make_call(spec: dict[str, Any], device: str, seed: int = 0) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The tensors of ``call_spec`` on ``device``."""
    import torch

    gen = torch.Generator().manual_seed(seed)

    def leaf(d: dict[str, Any]) -> Any:
        if "value" in d:
            return d["value"]
        dtype = getattr(torch, d["dtype"])
        if dtype is torch.bool:
            t = torch.rand(d["shape"], generator=gen) > 0.5
        elif dtype.is_floating_point or dtype.is_complex:
            t = torch.randn(d["shape"], generator=gen).to(dtype)
        else:
            lo, hi = d["range"] or (0, 1)
            t = torch.randint(lo, hi + 1, d["shape"], generator=gen, dtype=dtype)
        return t.to(device)

    return tuple(leaf(d) for d in spec["args"]), {k: leaf(d) for k, d in spec["kwargs"].items()}
