"""The ``edge-threshold`` golden sample's values: the constants the exported program compares a
float16/bfloat16 tensor with, and the values of the input's dtype at and around each.

pytorch#128306 (torch 2.11): eager compares a bfloat16 ``scores > 0.2`` in bfloat16, where 0.2 is
0.2001953125, so a score of exactly 0.2001953125 is not above it; the package torch 2.11 built
compared in float32 and said it was (a 0/1 output flipped). Random samples and the other edge
recipes never put a value exactly at a constant as the input's dtype rounds it, so that build
passed. Inductor's elision of precision casts flips the same comparisons where an op before one
rounds in eager only (``x * 1.002 > 0.2``: pytorch#159239's class).

Constants are read from ``aten.{gt,lt,ge,le,eq,ne}`` (``.Scalar``, or ``.Tensor`` with a 0-d
constant tensor on either side), the bounds of ``clamp``/``clamp_min``/``clamp_max``/``hardtanh``
and ``threshold``'s threshold, where the tensor compared is float16/bfloat16: at most
``MAX_CONSTANTS``, in graph order. Which input feeds which comparison is not traced: every
half-precision input (masks aside) draws from all of them, rounded to its own dtype, so a
comparison of an input with a constant is hit and one of an intermediate only by chance.

The pool is laid out so that the most telling values (each constant rounded to the dtype, then its
neighbours) land on the input's first elements: a four-value input drawn at random from a pool of
three misses a given value one time in five.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from runtime_probe.golden import recipe as _recipe

__all__ = ["MAX_CONSTANTS", "comparison_constants", "note", "threshold_pool", "threshold_values"]

MAX_CONSTANTS = 32  # each gives up to 8 values; more than a few dozen comparisons is a model no sample covers anyway
_HALF = ("float16", "bfloat16")
_COMPARISONS = ("gt", "lt", "ge", "le", "eq", "ne")
# ops that pass a constant through unchanged on its way to a comparison (a lifted 0-d tensor)
_PASS = ("lift_fresh_copy", "lift_fresh", "detach", "detach_", "clone", "alias", "_to_copy", "to")


def _operands() -> dict[Any, tuple[tuple[int, ...], tuple[int, ...]]]:
    """op -> (the positions of the tensor compared, those of its constants: a scalar or a 0-d
    constant tensor). A comparison takes them in either order; a clamp's tensor comes first."""
    import torch

    aten = torch.ops.aten
    either = ((0, 1), (0, 1))
    out: dict[Any, tuple[tuple[int, ...], tuple[int, ...]]] = {
        getattr(getattr(aten, n), o): either for n in _COMPARISONS for o in ("Scalar", "Tensor")
    }
    for op, where in ((aten.clamp.default, (1, 2)), (aten.clamp.Tensor, (1, 2)), (aten.clamp_min.default, (1,)),
                      (aten.clamp_max.default, (1,)), (aten.hardtanh.default, (1, 2)), (aten.threshold.default, (1,))):  # fmt: skip
        out[op] = ((0,), where)
    return out


def comparison_constants(ep: Any) -> tuple[float, ...]:
    """The constants a float16/bfloat16 tensor is compared with or clamped at in ``ep`` (an
    ExportedProgram), each once, in graph order (subgraphs included), at most ``MAX_CONSTANTS``."""
    import torch

    operands = _operands()
    found: list[float] = []
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            tensors, constants = operands.get(node.target, ((), ())) if node.op == "call_function" else ((), ())
            args = list(node.args)
            for t in (t for t in tensors if t < len(args) and _is_half(args[t])):
                for i in (i for i in constants if i != t and i < len(args)):
                    value = _constant(ep, gm, args[i])
                    if value is not None and value not in found:
                        found.append(value)
            if len(found) >= MAX_CONSTANTS:
                return tuple(found[:MAX_CONSTANTS])
    return tuple(found)


def _is_half(arg: Any) -> bool:
    import torch

    val = getattr(arg, "meta", {}).get("val") if isinstance(arg, torch.fx.Node) else None
    return str(getattr(val, "dtype", "")).replace("torch.", "") in _HALF


def _constant(ep: Any, gm: Any, arg: Any) -> float | None:
    """``arg``'s value when it is a Python number or a one-element constant tensor (a lifted
    constant, buffer or parameter, an attribute, ``scalar_tensor``); None otherwise."""
    import torch

    if isinstance(arg, bool) or not isinstance(arg, int | float | torch.fx.Node):
        return None
    if isinstance(arg, int | float):
        return float(arg) if math.isfinite(arg) else None
    for _ in range(8):  # back through the copies export puts between a constant and its use
        name = str(getattr(arg.target, "__name__", "")).split(".")[0]
        if arg.op != "call_function" or name not in _PASS or not arg.args or not isinstance(arg.args[0], torch.fx.Node):
            break
        arg = arg.args[0]
    tensor: Any = None
    if arg.op == "placeholder":
        sig = ep.graph_signature
        fqn = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}.get(arg.name)
        tensor = ep.constants.get(fqn, ep.state_dict.get(fqn)) if fqn is not None else None
    elif arg.op == "get_attr":
        tensor = getattr(gm, str(arg.target), None)
    elif arg.op == "call_function" and arg.target is torch.ops.aten.scalar_tensor.default and arg.args:
        return _constant(ep, gm, arg.args[0])
    if not isinstance(tensor, torch.Tensor) or tensor.numel() != 1 or tensor.dtype == torch.bool or tensor.is_complex():
        return None
    value = float(tensor.detach().to("cpu").reshape(()).item())
    return value if math.isfinite(value) else None


def threshold_values(constants: Sequence[float], dtype: str) -> list[float]:
    """The ``dtype`` values where a comparison with one of ``constants`` may flip, most telling
    first: each constant rounded to ``dtype``; the next value above and below it; its float32
    value cast down (where that rounds otherwise); for a negative constant the same with the
    other sign too. Finite, each once."""
    import torch

    if not constants:
        return []
    dt = getattr(torch, dtype)
    wide = torch.tensor(list(constants), dtype=torch.float64)
    at = wide.to(dt)
    tiers = [
        at,
        torch.nextafter(at, torch.full_like(at, math.inf)),
        torch.nextafter(at, torch.full_like(at, -math.inf)),
        wide.to(torch.float32).to(dt),
    ]
    tiers += [-t[wide < 0] for t in tiers]
    out: list[float] = []
    for t in tiers:
        for v in t.to(torch.float64).tolist():
            if math.isfinite(v) and v not in out:
                out.append(v)
    return out


def threshold_pool(values: Sequence[float], dtype: str, seed: int, numel: int) -> Any:
    """A 1-D ``dtype`` pool of ``values`` laid out so that an input of ``numel`` elements drawn
    from it with ``seed`` (recipe.pool_indices) holds the first ones on its first elements, as
    many as fit; the rest of the input draws from all of them."""
    import torch

    k = len(values)
    placed, layout = min(k, numel), None
    while placed > 0 and layout is None:
        layout = _layout(seed, placed, k)
        placed = placed if layout is not None else placed // 2
    size, slots = layout if layout is not None else (k, [])
    pool = [values[j % k] for j in range(size)]
    for i, slot in enumerate(slots):
        pool[slot] = values[i]
    return torch.tensor(pool, dtype=torch.float64).to(getattr(torch, dtype))  # exact: each is a value of dtype


def _layout(seed: int, placed: int, k: int) -> tuple[int, list[int]] | None:
    """The smallest pool size (at least ``k``, at most POOL_MAX) at which an input's first
    ``placed`` elements draw distinct positions, and those positions; None when there is none."""
    for size in range(max(k, placed), _recipe.POOL_MAX + 1):
        slots = [int(i) for i in _recipe.pool_indices(seed, 0, placed, size).tolist()]
        if len(set(slots)) == placed:
            return size, slots
    return None


def note(constants: Sequence[float], inputs: Mapping[str, str], shown: int = 8) -> str:
    """The ``edge-threshold`` sample's note: its ``inputs`` (name -> dtype) and the first ``shown``
    constants with what each rounds to there ("0.2 (bfloat16 0.2001953125)")."""
    import torch

    dtypes = sorted(set(inputs.values()))
    parts = []
    for c in constants[:shown]:
        rounded = ", ".join(f"{d} {float(torch.tensor(c, dtype=torch.float64).to(getattr(torch, d)).item())!r}" for d in dtypes)
        parts.append(f"{c:g} ({rounded})")
    more = f" and {len(constants) - shown} more" if len(constants) > shown else ""
    return (
        f"half-precision edge {_recipe.THRESHOLD!r}: {', '.join(f'{n} ({d})' for n, d in inputs.items())} at the comparison "
        f"constants {', '.join(parts)}{more} and the values next to them, so that a comparison done in another precision flips "
        "(every half-precision input draws from them: which one a comparison reads is not traced)"
    )
