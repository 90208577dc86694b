"""The dims the user declared dynamic, read from a ``dynamic_shapes`` (``--dynamic`` flags become
one: builder/resolve/dynamic.py) with the example's size of each: what export/hints.py puts torch's
suggested fixes against. Split from export/hints.py, which re-exports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Declared", "declared_dims"]


@dataclass(frozen=True)
class Declared:
    """A dimension the user declared dynamic: ``input:dim`` is ``mul * name + add``, ``name`` in
    [min, max] (None: not given); ``example`` is the example input's size there."""

    input: str
    dim: int
    name: str
    min: int | None = None
    max: int | None = None
    mul: int = 1
    add: int = 0
    example: int | None = None

    @property
    def where(self) -> str:
        return f"{self.input}:{self.dim}"


def declared_dims(dynamic_shapes: Any, bound_inputs: Mapping[str, Any]) -> list[Declared]:
    """The named Dims of a ``dynamic_shapes`` (a dict by parameter name, or a tuple/list in the
    inputs' order), top-level tensor inputs only; ``bound_inputs``: the example inputs by name."""
    if dynamic_shapes is None:
        return []
    if isinstance(dynamic_shapes, Mapping):
        items = list(dynamic_shapes.items())
    elif isinstance(dynamic_shapes, (tuple, list)):
        items = list(zip(bound_inputs, dynamic_shapes))
    else:
        return []
    default_min, default_max = _dim_defaults()
    out: list[Declared] = []
    for name, spec in items:
        if isinstance(spec, Mapping):
            per_dim = [(d, s) for d, s in spec.items() if isinstance(d, int)]
        elif isinstance(spec, (tuple, list)):
            per_dim = list(enumerate(spec))
        else:
            continue
        example = bound_inputs.get(str(name))
        rank = len(getattr(example, "shape", ()) or ())
        for dim, s in per_dim:
            decl = _declared(str(name), dim if dim >= 0 or not rank else rank + dim, s, default_min, default_max, example)
            if decl is not None:
                out.append(decl)
    return out


def _dim_defaults() -> tuple[Any, Any]:
    """A Dim's min and max when none is given (they changed across torch versions)."""
    from torch.export import Dim

    probe = Dim("_aoti_guard_probe")
    return getattr(probe, "min", None), getattr(probe, "max", None)


def _declared(name: str, dim: int, spec: Any, default_min: Any, default_max: Any, example: Any) -> Declared | None:
    root = getattr(spec, "root", None)
    fn = getattr(spec, "fn", None)
    base = root if root is not None else spec
    dim_name = getattr(base, "__name__", None)
    if not isinstance(dim_name, str) or not hasattr(base, "min"):
        return None  # None, an int, or a hint such as Dim.AUTO: nothing the user named
    mul, add = 1, 0
    if root is not None and callable(fn):
        try:
            add = int(fn(0))
            mul = int(fn(1)) - add
        except (TypeError, ValueError):
            return None
    lo, hi = getattr(base, "min", None), getattr(base, "max", None)
    lo = None if lo is None or lo == default_min else _int_or_none(lo)
    hi = None if hi is None or hi == default_max else _int_or_none(hi)
    shape = getattr(example, "shape", None)
    size = int(shape[dim]) if shape is not None and 0 <= dim < len(shape) else None
    return Declared(name, dim, dim_name, lo, hi, mul, add, size)


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # int_oo
        return None
