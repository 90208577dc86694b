"""The valid values of integer inputs that index a table, read from the exported graph.

An id outside the table is undefined behaviour in the compiled model: garbage or a SIGSEGV on CPU,
a device-side assert that poisons the CUDA context on the GPU. Export knows the table's size, so
the contract records, for each user input that reaches an indexing op directly, the range of
values it may hold: ``aten.embedding`` (the weight's rows), ``index_select`` / ``gather`` (the
indexed dim's size) and advanced indexing ``aten.index.Tensor`` (which also takes negative
indices). The probe's ``--inputs`` check and the guarded loader test values against it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["index_value_ranges"]


def _size(node: Any, dim: int) -> int | None:
    val = getattr(node, "meta", {}).get("val")
    shape = getattr(val, "shape", None)
    if shape is None or not -len(shape) <= dim < len(shape):
        return None
    size = shape[dim]
    return size if isinstance(size, int) else None  # a dynamic table has no fixed range


def _uses(node: Any) -> list[tuple[Any, int, bool]]:
    """(the indexed tensor, its dim, negative indices allowed) for each op that indexes with ``node``."""
    import torch

    aten = torch.ops.aten
    out: list[tuple[Any, int, bool]] = []
    for user in node.users:
        if user.op != "call_function":
            continue
        args = user.args
        if user.target is aten.embedding.default and len(args) >= 2 and args[1] is node:
            out.append((args[0], 0, False))
        elif user.target in (aten.index_select.default, aten.gather.default) and len(args) >= 3 and args[2] is node:
            out.append((args[0], int(args[1]), False))
        elif user.target is aten.index.Tensor and len(args) >= 2:
            for dim, idx in enumerate(args[1]):
                if idx is node:
                    out.append((args[0], dim, True))
    return out


def index_value_ranges(ep: Any) -> dict[str, tuple[int, int]]:
    """Placeholder name -> [min, max] for each integer user input that indexes a table.

    An input that indexes several tables gets the intersection of their ranges."""
    import torch

    user = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == torch.export.graph_signature.InputKind.USER_INPUT}
    ranges: dict[str, tuple[int, int]] = {}
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        val = node.meta.get("val")
        if val is None or getattr(val, "dtype", None) not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            continue
        for table, dim, negative in _uses(node):
            size = _size(table, dim)
            if size is None or size <= 0:
                continue
            lo, hi = (-size if negative else 0), size - 1
            if node.name in ranges:
                lo, hi = max(lo, ranges[node.name][0]), min(hi, ranges[node.name][1])
            ranges[node.name] = (lo, hi)
    return ranges
