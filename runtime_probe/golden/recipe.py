"""The golden input generator the build and the probe share: a seeded recipe made again,
bit-exactly, on the target.

The build (aoti_guard/builder/golden.py) generates every sample's inputs here; a sample
too large to store keeps only its recipes (manifest ``InputRecipe``: shape, stride, dtype, kind,
seed, a value pool in the golden file, a SHA-256 of the values) and the probe regenerates them
with the same code. Values are made on the CPU, then moved to the device.

Why not ``torch.randint``: its stream is the generator's implementation, which torch may change
between versions. The values here come from a counter-based hash in exact int64 arithmetic (every
product stays below 2**62), so they depend on nothing but the recipe; the SHA-256 still catches a
target that computes them differently (``golden.recipe_mismatch``, never a wrong verdict).

Kinds, by what the example's input looks like:
- ``mask``: a 1-D or 2-D input whose name holds "mask" and whose values are all 0/1 (or bool):
  rows padded on the right, on the left, and not at all, in turn, at least one position kept;
- ``ids``: an integer input the build found indexing a table (``TensorSpec.value_range``):
  values across the whole range, its first and last value always present;
- ``positions``: an integer input whose name holds "position": 0, 1, 2... along the last dim,
  following a mask of the same shape where there is one (a padded position repeats its
  neighbour's, as ``cumsum(mask) - 1`` does);
- ``pool``: anything else: values drawn from at most ``POOL_MAX`` of the example's own values.

Half-precision edges (``EDGES``): a float16/bfloat16 input the example does not push to its dtype's
limits gets, beside its ordinary samples, one sample per edge recipe whose values lie where the
dtype breaks: magnitudes around sqrt(max) (a product of two overflows), near max (a sum overflows),
and, for bfloat16, magnitudes 2**-8..2**8 whose mantissas use all 7 bits (a sum of two rounds). Each is
a ``pool`` recipe over a pool ``edge_pool`` makes (the example's signs, so a model that needs
positive inputs still gets them), stored in the golden file like any pool: the probe regenerates
an edge sample with the same code as any other, and the sample's id names the recipe. One more,
``edge-threshold``, puts them at the constants the program compares them with: its pool is chosen
by the build (aoti_guard/builder/thresholds.py) and regenerated here like any other.

torch is imported inside the functions (runtime_probe imports nothing else at import time).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import InputRecipe, InputSpec, Symbol

__all__ = [
    "EDGES",
    "EDGE_SAMPLE_IDS",
    "KINDS",
    "MAX_INPUT_BYTES",
    "MAX_SAMPLE_BYTES",
    "POOL_MAX",
    "THRESHOLD",
    "Edge",
    "RecipeError",
    "Sized",
    "Template",
    "check_recipe",
    "contract_problem",
    "edge_pool",
    "edge_sample_id",
    "edges_for",
    "generate",
    "input_seed",
    "plan",
    "pool_indices",
    "recipe",
    "recipe_bytes",
    "sha256_of",
]

KINDS = ("pool", "mask", "ids", "positions")
POOL_MAX = 4096  # values of the example a recipe draws from (stored in the golden file)
# What one regenerated input may take, checked before anything is allocated: a recipe comes from
# a file an attacker may have written. 4 GiB is an image batch of 32 x 3 x 2048 x 2048 in float32.
MAX_INPUT_BYTES = 4 << 30
MAX_SAMPLE_BYTES = 8 << 30  # all of one sample's generated inputs together
# Counters hashed at a time: few and large chunks, so that the hash's ops are few. Every op on a
# chunk of at least 32768 elements (ATen's grain size) opens a parallel region over torch's
# threads, and on a machine busy with other builds each region waits for threads the scheduler
# put aside: at 2**16 (2026-11-25 night, the fastest on an idle host) gpt2_cache's and
# llama_cache's validation went from 68-73 s to more than 300 s on the GPU host (run 20,
# docs/gpu-validation.md). On this project's 2-core host beside two processes of torch ops, 12.5 M
# values took 0.9-1.4 s at 2**22 in place and 0.7-14 s at 2**16, smaller chunks no better
# (docs/benchmarks.md, "The golden input generator"). The arithmetic in place keeps
# 2**22's temporaries to two. The values do not depend on the chunk (PINNED in
# tests/unit/test_golden_recipe.py).
_CHUNK = 1 << 22
_M31 = 0x7FFFFFFF
ITEMSIZE = {
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
}
_INTEGER = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"})


class RecipeError(ValueError):
    """A recipe that cannot be regenerated safely (sizes beyond the caps, an unknown kind)."""


@dataclass(frozen=True)
class Template:
    """How one input is generated, whatever the sample's sizes (``plan``'s answer)."""

    kind: str
    pool: Any = None  # "pool": the 1-D tensor of values
    low: int | None = None
    high: int | None = None
    keep: int | None = None
    pad: int | None = None
    follows: str | None = None
    key: str | None = None  # "pool": the golden-file key of its pool, where not the input's own (an edge pool)


def input_seed(seed: int, sample_id: str, name: str) -> int:
    """The seed of one input of one sample: 31 bits of SHA-256 over the three (stable everywhere)."""
    return int.from_bytes(hashlib.sha256(f"{seed}\0{sample_id}\0{name}".encode()).digest()[:4], "little") & _M31


def _hash31(start: int, count: int, seed: int) -> Any:
    """31-bit hashes of the counters start..start+count-1: a bijection of each block of 2**31
    counters (odd multipliers and xor-shifts modulo 2**31), every product below 2**62."""
    import torch

    i = torch.arange(start, start + count, dtype=torch.int64)
    # in place, step for step: x = ((i & M) * a + seed) & M; x ^= ((i >> 31) * b) & M; ...
    x = torch.bitwise_and(i, _M31)
    x.mul_(0x2545F491).add_(seed & _M31).bitwise_and_(_M31)
    x.bitwise_xor_(i.bitwise_right_shift_(31).mul_(0x6B43A9B5).bitwise_and_(_M31))
    x.bitwise_xor_(x >> 15)
    x.mul_(0x2C1B3C6D).bitwise_and_(_M31)
    x.bitwise_xor_(x >> 12)
    x.mul_(0x297A2D39).bitwise_and_(_M31)
    return x.bitwise_xor_(x >> 15)


def _dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def value_pool(example: Any) -> Any:
    """At most ``POOL_MAX`` of the example's values (all of them when it has no more), CPU, 1-D."""
    flat = example.detach().to("cpu").reshape(-1)
    if flat.numel() <= POOL_MAX:
        return flat.clone()
    return flat[_hash31(0, POOL_MAX, 0) % flat.numel()].clone()


@dataclass(frozen=True)
class Edge:
    """A half-precision edge recipe: the magnitudes ``low..high`` times the dtype's ``scale``
    (``sqrt_max``: sqrt of the largest finite value; ``max``: the largest; ``one``: 1)."""

    name: str  # the sample's id is ``edge-NAME``
    dtypes: tuple[str, ...]
    scale: str
    low: float
    high: float
    what: str  # why these values, for the sample's note

    def magnitudes(self, dtype: str) -> tuple[float, float]:
        """The recipe's magnitude range for ``dtype`` (inside its finite values)."""
        import torch

        top = float(torch.finfo(getattr(torch, dtype)).max)
        unit = {"sqrt_max": math.sqrt(top), "max": top, "one": 1.0}[self.scale]
        return self.low * unit, min(self.high * unit, top)


# One sample per edge that applies to a half-precision input of the model; bounded by this table
# and THRESHOLD (at most 4 extra samples), made only for float16/bfloat16 inputs.
EDGES = (
    Edge("overflow", ("float16", "bfloat16"), "sqrt_max", 0.9, 1.6, "around sqrt(max), so that a product of two overflows"),
    Edge("max", ("float16", "bfloat16"), "max", 0.125, 1.0, "near max, so that a sum or a doubling overflows"),
    Edge(
        "rounding",
        ("bfloat16",),
        "one",
        2.0**-8,
        2.0**8,
        "spread 2**-8..2**8 with mantissas that use all 7 of its bits, so that a sum of two rounds",
    ),
)
_EDGE_POOL = 256  # values in an edge pool (whatever the example's size)
# The value-aware edge sample (aoti_guard/builder/thresholds.py): half-precision inputs at the
# constants the program compares them with. Its pool is made by the build and stored in the golden
# file like any other, so the probe regenerates it without knowing how it was chosen.
THRESHOLD = "threshold"


def edge_sample_id(name: str) -> str:
    """The id of the golden sample the edge ``name`` makes (``edge-overflow``, ``edge-threshold``)."""
    return f"edge-{name}"


EDGE_SAMPLE_IDS = tuple(edge_sample_id(n) for n in (*(e.name for e in EDGES), THRESHOLD))  # a user's sample never takes one


def edges_for(dtype: str) -> list[Edge]:
    """The edge recipes of ``dtype`` (none but for float16 and bfloat16)."""
    return [e for e in EDGES if dtype in e.dtypes]


def edge_pool(pool: Any, dtype: str, edge: Edge) -> Any:
    """The 1-D ``dtype`` pool of ``edge``: its magnitudes, spread over the range (log-spaced for
    ``rounding``, each with a mantissa of 1 + j/128), with the signs of the example's ``pool`` in
    turn (zero counts as positive: a model that needs positive inputs still gets them)."""
    import torch

    low, high = edge.magnitudes(dtype)
    n = _EDGE_POOL
    if edge.scale == "one":
        exps = torch.floor(torch.linspace(math.log2(low), math.log2(high), n, dtype=torch.float64))
        mags = torch.exp2(exps) * (1.0 + (torch.arange(n, dtype=torch.float64) * 37 % 128) / 128.0)
    else:
        mags = torch.linspace(low, high, n, dtype=torch.float64)
    flat = pool.detach().to("cpu").reshape(-1).to(torch.float64)
    signs = torch.where(flat < 0, -1.0, 1.0) if flat.numel() else torch.ones(1, dtype=torch.float64)
    signs = signs[torch.arange(n) % signs.numel()]
    dt = getattr(torch, dtype)
    top = float(torch.finfo(dt).max)
    return (mags * signs).clamp(-top, top).to(dt)


def _mask_values(example: Any) -> tuple[int, int] | None:
    """(keep, pad) for a 0/1 mask: the value most of the example holds is the one attended to."""
    import torch

    flat = example.detach().to("cpu").reshape(-1)
    if flat.numel() == 0 or flat.is_floating_point() or flat.is_complex():
        return None
    ones = int((flat == 1).sum().item())
    zeros = int((flat == 0).sum().item())
    if ones + zeros != flat.numel():
        return None
    del torch
    return (1, 0) if ones >= zeros else (0, 1)


def plan(inputs: Sequence[InputSpec], examples: Sequence[Any]) -> dict[str, Template]:
    """Each tensor input's template, from the contract and the example's values."""
    import torch

    out: dict[str, Template] = {}
    masks: dict[str, tuple[int, ...]] = {}
    for spec, ex in zip(inputs, examples):
        if spec.tensor is None or not isinstance(ex, torch.Tensor):
            continue
        dtype, lower = spec.tensor.dtype, spec.name.lower()
        polarity = _mask_values(ex) if "mask" in lower and ex.dim() in (1, 2) else None
        if polarity is not None:
            out[spec.name] = Template("mask", keep=polarity[0], pad=polarity[1])
            masks[spec.name] = tuple(ex.shape)
        elif "position" in lower and dtype in _INTEGER and dtype != "bool" and ex.dim() >= 1:
            vr = spec.tensor.value_range
            out[spec.name] = Template("positions", high=vr[1] if vr is not None else None)
        elif spec.tensor.value_range is not None and dtype in _INTEGER and dtype != "bool":
            lo, hi = spec.tensor.value_range
            out[spec.name] = Template("ids", low=int(lo), high=int(hi))
        elif dtype in ITEMSIZE:
            out[spec.name] = Template("pool", pool=value_pool(ex))
    # positions follow a mask of the same shape (its padding), where the example has one
    for spec, ex in zip(inputs, examples):
        t = out.get(spec.name)
        if t is not None and t.kind == "positions":
            same = [m for m, shape in masks.items() if shape == tuple(ex.shape) and _same_dims(inputs, m, spec.name)]
            if same:
                out[spec.name] = replace(t, follows=same[0])
    return out


def _same_dims(inputs: Sequence[InputSpec], a: str, b: str) -> bool:
    """Both inputs' shapes are the same expressions (so they stay equal at every size)."""
    shapes = {i.name: i.tensor.shape for i in inputs if i.tensor is not None}
    return a in shapes and b in shapes and shapes[a] == shapes[b]


@dataclass(frozen=True)
class Sized:
    """One input's tensor at one sample's sizes: its dtype name, shape and stride."""

    dtype: str
    shape: Sequence[int]
    stride: Sequence[int]


def recipe(name: str, t: Template, pool_key: str | None, at: Sized, seed: int) -> InputRecipe:
    """The recipe of one input at one sample's sizes (its ``sha256`` empty until generated)."""
    return InputRecipe(
        name, t.kind, at.dtype, tuple(at.shape), tuple(at.stride), seed, "", pool_key if t.kind == "pool" else None,
        t.low, t.high, t.keep, t.pad, t.follows,
    )  # fmt: skip


def check_recipe(r: InputRecipe, pools: Mapping[str, tuple[str, tuple[int, ...]]]) -> None:
    """Refuse, before anything is allocated, a recipe whose sizes or references are unsafe.
    ``pools``: golden-file key -> (dtype name, shape) of the value pools there (a header is
    enough: nothing is read). Raises RecipeError."""
    if r.kind not in KINDS:
        raise RecipeError(f"input {r.input!r}: unknown kind {r.kind[:40]!r} (expected one of {', '.join(KINDS)})")
    if r.dtype not in ITEMSIZE:
        raise RecipeError(f"input {r.input!r}: dtype {r.dtype[:40]!r} cannot be generated")
    if r.kind != "pool" and r.dtype not in _INTEGER:
        raise RecipeError(f"input {r.input!r}: a {r.kind} input must have an integer dtype, not {r.dtype}")
    if len(r.stride) != len(r.shape) or any(n < 0 for n in r.shape) or any(s < 0 for s in r.stride):
        raise RecipeError(f"input {r.input!r}: shape {list(r.shape)[:8]} and stride {list(r.stride)[:8]} do not describe a tensor")
    nbytes = recipe_bytes(r)
    if nbytes > MAX_INPUT_BYTES:
        raise RecipeError(f"input {r.input!r}: shape {list(r.shape)[:8]} needs {nbytes} bytes, over the {MAX_INPUT_BYTES} byte cap")
    if not 0 <= r.seed <= _M31:
        raise RecipeError(f"input {r.input!r}: seed {r.seed} outside 0..{_M31}")
    if r.kind == "pool":
        dtype, shape = pools.get(r.pool or "", ("", ()))
        if len(shape) != 1 or not 0 < shape[0] <= POOL_MAX or dtype != r.dtype:
            raise RecipeError(f"input {r.input!r}: its value pool {str(r.pool)[:60]!r} is missing or not 1..{POOL_MAX} {r.dtype} values")
    if r.kind == "ids" and (r.low is None or r.high is None or r.low > r.high):
        raise RecipeError(f"input {r.input!r}: ids need a range low <= high, found {r.low}..{r.high}")
    if r.kind == "mask" and (r.keep not in (0, 1) or r.pad not in (0, 1) or r.keep == r.pad or len(r.shape) not in (1, 2)):
        raise RecipeError(f"input {r.input!r}: a mask is 1-D or 2-D with keep/pad values 0 and 1")


def recipe_bytes(r: InputRecipe) -> int:
    """What the generated tensor takes (its strided storage's span, or its elements), in bytes;
    Python integers, so a hostile shape cannot overflow it."""
    numel = math.prod(r.shape)
    span = 0 if numel == 0 else 1 + sum((n - 1) * s for n, s in zip(r.shape, r.stride))
    return max(numel, span) * ITEMSIZE.get(r.dtype, 8)


def _pool_info(pools: Mapping[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {k: (_dtype_name(t), tuple(t.shape)) for k, t in pools.items()}


def generate(recipes: Sequence[InputRecipe], pools: Mapping[str, Any]) -> dict[str, Any]:
    """Every input of one sample, on the CPU, with the recipe's stride: masks first (positions
    follow them). Raises RecipeError before allocating when a recipe is unsafe."""
    import torch

    info = _pool_info(pools)
    for r in recipes:
        check_recipe(r, info)
    total = sum(recipe_bytes(r) for r in recipes)
    if total > MAX_SAMPLE_BYTES:
        raise RecipeError(f"the sample's generated inputs need {total} bytes, over the {MAX_SAMPLE_BYTES} byte cap")
    made: dict[str, Any] = {}
    order = sorted(recipes, key=lambda r: {"mask": 0, "positions": 2}.get(r.kind, 1))
    for r in order:
        dtype = getattr(torch, r.dtype)
        if r.kind == "positions":
            follows = made.get(r.follows or "")
            if r.follows is not None and (follows is None or tuple(follows.shape) != r.shape):
                raise RecipeError(
                    f"input {r.input!r}: it follows mask {r.follows[:60]!r}, which this sample does not generate at its shape"
                )
            keep = next((m.keep for m in recipes if m.input == r.follows), None)
            flat = _positions(r, follows, keep)
        else:
            flat = torch.empty(math.prod(r.shape), dtype=dtype)
            _fill(r, flat, pools)
        values = flat.reshape(r.shape)
        out = torch.empty_strided(r.shape, r.stride, dtype=dtype)
        out.copy_(values)
        made[r.input] = out
    return made


def _fill(r: InputRecipe, flat: Any, pools: Mapping[str, Any]) -> None:
    import torch

    n = flat.numel()
    if r.kind == "mask":
        flat.copy_(_mask(r).reshape(-1))
        return
    for start in range(0, n, _CHUNK):
        count = min(_CHUNK, n - start)
        if r.kind == "pool":
            pool = pools[r.pool or ""]
            flat[start : start + count] = pool[pool_indices(r.seed, start, count, pool.numel())]
        else:  # ids
            h = _hash31(start, count, r.seed)
            assert r.low is not None and r.high is not None
            flat[start : start + count] = (h % (r.high - r.low + 1) + r.low).to(flat.dtype)
    if r.kind == "ids" and n:
        flat[0], flat[n - 1] = r.low, r.high  # the range's two ends are always tried
    del torch


def pool_indices(seed: int, start: int, count: int, size: int) -> Any:
    """The positions in a ``size``-value pool that elements ``start..start+count-1`` of a ``pool``
    input drawn with ``seed`` take (row-major order): what lets a pool be laid out so that chosen
    values land on an input's first elements (aoti_guard/builder/thresholds.py)."""
    return _hash31(start, count, seed) % size


def _mask(r: InputRecipe) -> Any:
    """Rows padded on the right, on the left and not at all, in turn; the pad lengths hashed
    from the seed, at least one position kept per row."""
    import torch

    seq = r.shape[-1] if r.shape else 1
    rows = math.prod(r.shape[:-1]) if len(r.shape) > 1 else 1
    side = torch.arange(rows, dtype=torch.int64) % 3  # 0 right, 1 left, 2 none
    length = (_hash31(0, rows, r.seed) % max(seq - 1, 1) + 1) if seq > 1 else torch.zeros(rows, dtype=torch.int64)
    length = torch.where(side == 2, torch.zeros_like(length), length)
    j = torch.arange(seq, dtype=torch.int64)[None, :]
    padded = ((side[:, None] == 0) & (j >= seq - length[:, None])) | ((side[:, None] == 1) & (j < length[:, None]))
    values = torch.where(padded, torch.tensor(r.pad, dtype=torch.int64), torch.tensor(r.keep, dtype=torch.int64))
    return values.to(getattr(torch, r.dtype))


def _positions(r: InputRecipe, mask: Any, keep: int | None) -> Any:
    import torch

    if mask is not None:
        kept = (mask.contiguous() == (1 if keep is None else keep)).to(torch.int64)
        pos = (kept.cumsum(-1) - 1).clamp_min(0)
    elif r.shape:
        pos = torch.arange(r.shape[-1], dtype=torch.int64).expand(*r.shape).contiguous()
    else:
        pos = torch.zeros((), dtype=torch.int64)
    if r.high is not None:
        pos = pos.clamp_max(r.high)
    return pos.to(getattr(torch, r.dtype)).reshape(-1)


def sha256_of(t: Any) -> str:
    """SHA-256 of a tensor's row-major little-endian bytes (what a safetensors file stores)."""
    from runtime_probe.formats.safetensors import tensor_bytes

    h = hashlib.sha256()
    flat = t.detach().reshape(-1)
    for start in range(0, flat.numel(), _CHUNK):
        h.update(tensor_bytes(flat[start : start + _CHUNK]))
    return h.hexdigest()


def contract_problem(r: InputRecipe, spec: InputSpec | None, symbols: Mapping[str, int], ranges: Iterable[Symbol]) -> str | None:
    """Why a recipe does not fit the contract (None: it fits): the input, its dtype, its shape at
    the sample's sizes, each size inside its declared range, its stride. Pure Python: the probe
    asks it before handing the recipe to a child that allocates."""
    if spec is None or spec.tensor is None:
        return f"names input {r.input[:60]!r}, which is not a tensor input of the contract"
    if r.dtype != spec.tensor.dtype:
        return f"gives input {r.input!r} the dtype {r.dtype[:40]!r}; the contract says {spec.tensor.dtype}"
    for sym in ranges:
        value = symbols.get(sym.name)
        if value is not None and not (sym.min <= value and (sym.max is None or value <= sym.max)):
            return f"sets {sym.name}={value}, outside its declared range {sym.min}..{sym.max if sym.max is not None else 'inf'}"
    try:
        shape = [d if isinstance(d, int) else _symexpr.compile_expr(d.expr)(symbols) for d in spec.tensor.shape]
        stride = [s if isinstance(s, int) else _symexpr.compile_expr(s)(symbols) for s in spec.tensor.stride]
    except (_symexpr.ExprError, KeyError, TypeError, ValueError):
        return f"gives input {r.input!r} sizes its sample's symbols do not determine ({dict(list(symbols.items())[:6])})"
    if list(r.shape) != shape:
        return f"gives input {r.input!r} the shape {list(r.shape)[:8]}; the contract at these sizes says {shape}"
    if list(r.stride) != stride:
        return f"gives input {r.input!r} the stride {list(r.stride)[:8]}; the contract at these sizes says {stride}"
    return None
