"""``probe --shapes x:4x16,mask:4x32``: time (and run) the model at sizes of the user's choosing
inside its contract, with inputs generated as the build generates golden samples: the recipes of
runtime_probe/golden/recipe.py at the new sizes with a fixed seed (a mask padded on the right, on
the left and not at all; ids across their table; positions that follow the mask; other values
drawn from the example sample's), made in the child (child/ops.py ``_resized``).

An input left out takes the sizes its dims' expressions give with the symbols the named inputs
bind (``--shapes x:8x16`` sets ``batch`` = 8, so ``mask`` is 8x32). Sizes outside the contract are
refused by the contract check before native code runs, with the finding the guarded loader gives.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim, InputSpec
from runtime_probe.reporting.errors import UsageError

__all__ = ["describe", "parse_shapes", "resolve_shapes", "run_names", "shape_sets"]

_HINT = "write --shapes NAME:D0xD1x...,NAME2:..., e.g. --shapes x:4x16 (a 0-d tensor: x:scalar)"


def shape_sets(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """ProbeOptions.shapes as its sets: one string (the library's first form) is one set."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def run_names(count: int) -> list[str]:
    """The runs' names (sample ids in the report and in --save-inputs file names): ``shapes`` for
    one set, as before the flag repeated; ``shapes1``... for several (golden/records.py refuses a
    golden sample of either name)."""
    return ["shapes"] if count == 1 else [f"shapes{i}" for i in range(1, count + 1)]


def describe(sizes: dict[str, list[int]]) -> str:
    """Every input's sizes in the flag's own grammar (``x:4x16,mask:4x32``): the run's label."""
    return ",".join(f"{name}:{'x'.join(str(n) for n in dims) if dims else 'scalar'}" for name, dims in sizes.items())


def parse_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """``x:4x16,mask:4x32`` -> {"x": (4, 16), "mask": (4, 32)}. Raises UsageError."""
    out: dict[str, tuple[int, ...]] = {}
    for item in (part.strip() for part in text.split(",")):
        name, sep, dims = item.rpartition(":")
        if not sep or not name or not dims:
            raise UsageError(f"--shapes: {item!r} is not NAME:SHAPE", hint=_HINT)
        if name in out:
            raise UsageError(
                f"--shapes: {name} is given twice in {text!r}: one set gives each input once",
                hint=f"to run and time several sizes, repeat the flag: --shapes {name}:... --shapes {name}:...",
            )
        if dims == "scalar":
            out[name] = ()
            continue
        try:
            sizes = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            raise UsageError(f"--shapes: {item!r}: sizes are whole numbers joined by x", hint=_HINT) from None
        if any(s < 0 for s in sizes):
            raise UsageError(f"--shapes: {item!r}: a size is negative", hint=_HINT)
        out[name] = sizes
    return out


def resolve_shapes(given: dict[str, tuple[int, ...]], inputs: Sequence[InputSpec]) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Every tensor input's sizes, and the symbols they bind. Raises UsageError for a name the
    model does not take, a wrong rank, or an input left out whose sizes the others do not set.
    Ranges and equalities are checked later, by the contract check (``input.range``...)."""
    tensors = [i for i in inputs if i.kind == "tensor" and i.tensor is not None]
    names = [i.name for i in tensors]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UsageError(f"--shapes: the model has no tensor input {', '.join(unknown)}", hint=f"its tensor inputs: {', '.join(names)}")
    symbols: dict[str, int] = {}
    for spec in tensors:
        assert spec.tensor is not None
        if spec.name not in given:
            continue
        sizes = given[spec.name]
        if len(sizes) != len(spec.tensor.shape):
            raise UsageError(
                f"--shapes: {spec.name} has {len(spec.tensor.shape)} dims in the contract, {len(sizes)} given",
                hint=f"{spec.name} is ({', '.join(_dim(d) for d in spec.tensor.shape)})",
            )
        for d, n in zip(spec.tensor.shape, sizes):
            if isinstance(d, Dim) and _symexpr.is_symbol(d.expr):
                symbols.setdefault(d.expr, n)  # a second, different size is the contract check's to refuse
    out: dict[str, list[int]] = {}
    for spec in tensors:
        assert spec.tensor is not None
        if spec.name in given:
            out[spec.name] = list(given[spec.name])
            continue
        try:
            out[spec.name] = [d if isinstance(d, int) else int(_symexpr.compile_expr(d.expr)(symbols)) for d in spec.tensor.shape]
        except (_symexpr.ExprError, KeyError, ValueError):
            raise UsageError(
                f"--shapes: give {spec.name}'s sizes too: the other inputs do not set them "
                f"({spec.name} is ({', '.join(_dim(d) for d in spec.tensor.shape)}))",
                hint=_HINT,
            ) from None
    return out, symbols


def _dim(d: int | Dim) -> str:
    return str(d) if isinstance(d, int) else d.expr
