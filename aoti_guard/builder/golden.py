"""Golden samples and the tolerance rule.

Samples: the example inputs, plus inputs generated inside the dynamic ranges: every root symbol at
its minimum, every one at its maximum (twice the example's value where unbounded), and one drawn
at random in between. Values come from runtime_probe/golden/recipe.py, the generator the probe
runs again on a sample stored as a recipe: attention masks padded left and right, ids across
their table, positions following the mask, and anything else drawn from the example's own values
(so a model that needs positive inputs still gets them); strides follow the compiled layout.
A model with float16/bfloat16 inputs also gets one sample per half-precision edge recipe
(``recipe.EDGES``, ids ``edge-overflow``, ``edge-max``, ``edge-rounding``) at the example's sizes:
values whose products or sums overflow, or round, where eager rounds every op and a compiler that
keeps intermediates in float32 does not. Its NaN/Inf are compared with eager's, never an error
of their own. One that compares such a tensor with a constant also gets ``edge-threshold``: values
at the constant as the input's dtype rounds it and next to it (thresholds.py), where a comparison
done in another precision flips.

Tolerance rule (recorded per output in the manifest, applied by the probe):
    rtol = RTOL_FLOOR[dtype]
    excess = max over samples and elements of max(0, |compiled - eager| - rtol * |eager|)
    atol = max(ATOL_FLOOR[dtype], MARGIN * excess)
and a target passes when ``|out - ref| <= atol + rtol * |ref|`` holds everywhere. The margin
absorbs reduction-order differences (thread counts, atomics) on the target, which runs the same
native code as the build host.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from aoti_guard.builder import thresholds as _thresholds
from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.golden import recipe as _recipe
from runtime_probe.package.manifest import DataCheck, Dim, InputRecipe, IOContract, ShapeGuard, Symbol, Tolerance
from runtime_probe.runtime import numerics as _numerics

__all__ = [
    "ATOL_FLOOR",
    "RTOL_FLOOR",
    "TOLERANCE_RULE",
    "Sample",
    "ToleranceStats",
    "coverage",
    "make_samples",
    "planned_assignments",
    "pool_key",
    "satisfy_guards",
    "stored_floor",
]

MARGIN = 4.0
ATOL_FLOOR = {"float64": 1e-7, "float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2, "complex64": 1e-5, "complex128": 1e-7}
RTOL_FLOOR = {"float64": 1e-7, "float32": 1.3e-6, "float16": 1e-3, "bfloat16": 1.6e-2, "complex64": 1.3e-6, "complex128": 1e-7}
# (What compiled vs eager must satisfy at build time is another tolerance: tolerance.py.)
TOLERANCE_RULE = (
    f"rtol = floor(dtype); atol = max(floor(dtype), {MARGIN:g} * max(0, |compiled - eager| - rtol*|eager|)); "
    "pass when |out - ref| <= atol + rtol*|ref| (floors: float32 1e-5/1.3e-6, float16 1e-3/1e-3, bfloat16 1e-2/1.6e-2, float64 1e-7/1e-7; integers exact)"
)


@dataclass
class Sample:
    id: str
    symbols: dict[str, int]
    leaves: list[Any]  # in contract input order: tensors (CPU) and constant values
    outputs: list[Any] = field(default_factory=list)  # eager outputs (CPU), in contract output order
    note: str = ""  # how it was made, where that is not the plain min/max/mid (moved to satisfy an export guard)
    # "example" (the factory's inputs), "generated" (made here, from ``recipes``) or "user" (given
    # samples): a generated sample too large to store keeps its recipes, a captured one its inputs
    origin: str = "generated"
    recipes: list[InputRecipe] = field(default_factory=list)  # the generated inputs' recipes (sha256 filled)
    pools: dict[str, Any] = field(default_factory=dict)  # the recipes' value pools: golden-file key -> 1-D tensor
    worst: dict[str, list[int]] = field(default_factory=dict)  # output -> the build's worst-error positions
    # the half-precision edge recipe that made it (recipe.EDGES: "overflow"...), "" for any other:
    # its eager outputs may overflow, and compiled must then overflow in the same places
    edge: str = ""

    def nbytes(self) -> int:
        return sum(int(t.numel() * t.element_size()) for t in [*self.leaves, *self.outputs] if hasattr(t, "element_size"))


def _example_symbols(contract: IOContract, leaves: Sequence[Any]) -> dict[str, int]:
    """Each symbol's value in the example inputs.

    A bare symbol (``batch``) is read off the size directly. A symbol that appears only under an
    expression (``8*seq8``, ``s0 + 1``, ``2*s0``: a derived dimension) is solved for from the
    size, once every other symbol in that expression is known.
    """
    values: dict[str, int] = {}
    derived: list[tuple[str, int]] = []
    for spec, value in zip(contract.inputs, leaves):
        if spec.tensor is None:
            continue
        for d, dim in enumerate(spec.tensor.shape):
            if isinstance(dim, Dim):
                if _symexpr.is_symbol(dim.expr):
                    values.setdefault(dim.expr, int(value.shape[d]))
                else:
                    derived.append((dim.expr, int(value.shape[d])))
    bounds = {s.name: s for s in contract.symbols}
    by_name = {spec.name: value for spec, value in zip(contract.inputs, leaves)}
    for s in contract.symbols:  # a symbol that is an input's value (x.item(): a data-dependent check)
        if s.value_of is not None and hasattr(by_name.get(s.value_of), "item"):
            values[s.name] = int(by_name[s.value_of].item())
    solved_one = True
    while derived and solved_one:
        solved_one = False
        for expr, size in list(derived):
            unknown = sorted(_symexpr.free_symbols(expr) - set(values))
            if len(unknown) > 1:
                continue
            derived.remove((expr, size))
            if unknown:
                bound = bounds.get(unknown[0])
                found = _symexpr.solve_for(
                    expr, unknown[0], size, values, bound.min if bound is not None else 0, bound.max if bound is not None else None
                )
                if found is not None:
                    values[unknown[0]] = found
                    solved_one = True
    return values


def _assignments(symbols: Sequence[Symbol], example: Mapping[str, int], rng: random.Random) -> list[tuple[str, dict[str, int]]]:
    roots = [s for s in symbols if s.name in example]
    if not roots:
        return []

    def hi(s: Symbol) -> int:
        return s.max if s.max is not None else max(s.min, 2 * example[s.name], 2)

    out = [
        ("min", {s.name: s.min for s in roots}),
        ("max", {s.name: hi(s) for s in roots}),
        ("mid", {s.name: rng.randint(s.min, hi(s)) for s in roots}),
    ]
    return out


def planned_assignments(contract: IOContract, example_leaves: Sequence[Any], *, seed: int = 0) -> list[tuple[str, dict[str, int]]]:
    """The symbol values of the samples ``make_samples`` generates over the declared ranges (no
    export guard applied): the example's, then min, max and mid, with the same seed."""
    example = _example_symbols(contract, example_leaves)
    return [("example", example), *_assignments(contract.symbols, example, random.Random(seed))]


# Export guards (IOContract.guards) the samples must satisfy when the build accepts them: a sample
# that breaks one is moved to the nearest values (L1 distance) that satisfy all, searched outward
# over at most this many candidates.
REPAIR_BUDGET = 200_000


def _guard_conditions(guards: Sequence[ShapeGuard | DataCheck]) -> list[tuple[ShapeGuard | DataCheck, _symexpr.Cond]]:
    out = []
    for g in guards:
        if g.expr is not None:
            try:
                out.append((g, _symexpr.compile_condition(g.expr)))
            except _symexpr.ExprError:
                continue
    return out


def _holds(conds: Sequence[tuple[ShapeGuard | DataCheck, _symexpr.Cond]], env: Mapping[str, int]) -> bool:
    try:
        return all(cond(env) for _, cond in conds)
    except _symexpr.ExprError:
        return False


def satisfy_guards(
    env: Mapping[str, int],
    conds: Sequence[tuple[ShapeGuard | DataCheck, _symexpr.Cond]],
    bounds: Mapping[str, tuple[int, int]],
    budget: int = REPAIR_BUDGET,
) -> dict[str, int] | None:
    """The values nearest ``env`` (L1 distance, each symbol within its ``bounds``) for which every
    condition holds; ``env`` itself when it does; None when none is found within ``budget`` tries.
    Ties go to the first in a fixed order (lower values of the earlier symbols first)."""
    names = sorted(env)
    start = [env[n] for n in names]
    tried = 0
    widest = max((hi - lo for lo, hi in (bounds.get(n, (env[n], env[n])) for n in names)), default=0)
    for distance in range(0, widest * max(len(names), 1) + 1):
        for offset in _offsets(len(names), distance):
            point = [v + o for v, o in zip(start, offset)]
            if any(not (bounds.get(n, (p, p))[0] <= p <= bounds.get(n, (p, p))[1]) for n, p in zip(names, point)):
                continue
            tried += 1
            candidate = dict(zip(names, point))
            if _holds(conds, candidate):
                return candidate
            if tried >= budget:
                return None
    return None


def _offsets(k: int, distance: int) -> Any:
    """Integer vectors of length ``k`` whose absolute values sum to ``distance``."""
    if k == 0:
        if distance == 0:
            yield ()
        return
    if k == 1:
        yield from ((-distance,), (distance,)) if distance else ((0,),)
        return
    for first in range(-distance, distance + 1):
        for rest in _offsets(k - 1, distance - abs(first)):
            yield (first, *rest)


def _guard_bounds(symbols: Sequence[Symbol], example: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    return {s.name: (s.min, s.max if s.max is not None else max(s.min, 2 * example[s.name], 2)) for s in symbols if s.name in example}


def _shape_and_stride(spec: Any, env: Mapping[str, int]) -> tuple[list[int], list[int]]:
    shape = [d if isinstance(d, int) else _symexpr.compile_expr(d.expr)(env) for d in spec.shape]
    stride = [s if isinstance(s, int) else _symexpr.compile_expr(s)(env) for s in spec.stride]
    return shape, stride


def _zeros(example: Any, shape: list[int], stride: list[int]) -> Any:
    import torch

    return torch.empty_strided(shape, stride, dtype=example.dtype).zero_()


def make_samples(
    contract: IOContract,
    example_leaves: Sequence[Any],
    *,
    seed: int = 0,
    guards: Sequence[ShapeGuard] = (),
    thresholds: Sequence[float] = (),
) -> tuple[list[Sample], list[str]]:
    """The example sample and generated boundary samples (without outputs yet). Also returns notes
    on samples that could not be generated.

    ``guards``: export guards the build accepted (--allow-export-guards): a min/max/mid sample that
    breaks one is moved to the nearest sizes that satisfy them all (the sample's ``note`` says
    from where). Without them the samples span the declared ranges, and those that break a guard
    are the evidence that the bare package computes the wrong branch there. The model's own checks
    on values (``contract.data_checks``) are always satisfied: a sample that breaks one is not a
    valid call (the eager model raises), so it is moved like a sample that breaks a guard.
    ``thresholds``: the constants the program compares its float16/bfloat16 tensors with
    (thresholds.comparison_constants): the ``edge-threshold`` sample puts its inputs there."""
    import torch

    notes: list[str] = []
    example_syms = _example_symbols(contract, example_leaves)
    example = [v.detach().to("cpu").clone() if isinstance(v, torch.Tensor) else v for v in example_leaves]
    samples = [Sample("example", dict(example_syms), example, origin="example")]
    rng = random.Random(seed)
    templates = _recipe.plan(contract.inputs, example_leaves)
    pools = {pool_key(name): t.pool for name, t in templates.items() if t.kind == "pool"}
    seen = {tuple(sorted(example_syms.items()))}
    conds = _guard_conditions([*guards, *(contract.data_checks or ())])
    for sample_id, env in _assignments(contract.symbols, example_syms, rng):
        sample_note = ""
        if conds and not _holds(conds, env):
            moved = satisfy_guards(env, conds, _guard_bounds(contract.symbols, example_syms))
            broken = [g for g, cond in conds if not _holds([(g, cond)], env)]
            words = "; ".join(g.words for g in broken)
            noun, kind = (
                ("values", "the model's check(s)") if any(isinstance(g, DataCheck) for g in broken) else ("sizes", "the export guard(s)")
            )
            if moved is None:
                notes.append(f"sample {sample_id} ({_fmt(env)}) not generated: no {noun} near it satisfy {kind} {words}")
                continue
            sample_note = f"moved from {_fmt(env)} to {_fmt(moved)}, the nearest {noun} that satisfy {kind} {words}"
            env = moved
        key = tuple(sorted(env.items()))
        if key in seen:
            continue
        seen.add(key)
        try:
            leaves, recipes = _generate(_Plan(contract, example_leaves, templates, pools, seed), env, sample_id)
        except (_symexpr.ExprError, RuntimeError, ValueError) as exc:
            notes.append(f"sample {sample_id} ({_fmt(env)}) not generated: {exc}")
            continue
        used = {r.pool for r in recipes if r.pool is not None}
        samples.append(Sample(sample_id, dict(env), leaves, note=sample_note, recipes=recipes, pools={k: pools[k] for k in used}))
    samples += _edge_samples(_Plan(contract, example_leaves, templates, pools, seed), example_syms, notes, thresholds)
    return samples, notes


def _edge_samples(plan: _Plan, env: Mapping[str, int], notes: list[str], thresholds: Sequence[float]) -> list[Sample]:
    """One sample per half-precision edge recipe (recipe.EDGES) that applies to a float16/bfloat16
    input, at the example's sizes: those inputs draw from the edge's pool, the others as in every
    sample; and ``edge-threshold`` where the program compares such a tensor with ``thresholds``
    (thresholds.py). None for a model without half-precision inputs (masks are left alone: their
    0/1 or 0/-inf values mean something)."""
    half = {
        spec.name: spec.tensor.dtype
        for spec in plan.contract.inputs
        if spec.tensor is not None and plan.templates.get(spec.name) is not None and plan.templates[spec.name].kind == "pool"
        and _recipe.edges_for(spec.tensor.dtype) and "mask" not in spec.name.lower()
    }  # fmt: skip
    draws: list[_EdgeDraw] = []
    for edge in _recipe.EDGES:
        names = [n for n, dtype in half.items() if dtype in edge.dtypes]
        if names:
            ranges = ", ".join(f"{n} ({half[n]}) |values| {_span(edge.magnitudes(half[n]))}" for n in names)
            pools = {n: _recipe.edge_pool(plan.templates[n].pool, half[n], edge) for n in names}
            draws.append(_EdgeDraw(edge.name, pools, f"half-precision edge recipe {edge.name!r}: {ranges}, {edge.what}"))
    if thresholds and half:
        draws.append(_threshold_draw(plan, env, half, thresholds))
    made = [_edge_sample(plan, env, draw, notes) for draw in draws]
    return [s for s in made if s is not None]


@dataclass(frozen=True)
class _EdgeDraw:
    """One edge sample's values: its edge's name, the pool each half-precision input draws from
    (input name -> 1-D tensor), and the sample's note."""

    edge: str
    pools: Mapping[str, Any]
    note: str


def _threshold_draw(plan: _Plan, env: Mapping[str, int], half: Mapping[str, str], thresholds: Sequence[float]) -> _EdgeDraw:
    """``edge-threshold``: every half-precision input at the comparison constants rounded to its
    dtype and their neighbours, the most telling values on its first elements (thresholds.py)."""
    sample_id = _recipe.edge_sample_id(_recipe.THRESHOLD)
    pools = {}
    for spec in plan.contract.inputs:
        if spec.name in half and spec.tensor is not None:
            try:
                numel = math.prod(_shape_and_stride(spec.tensor, env)[0])
            except _symexpr.ExprError:
                numel = 0  # the sample is not generated either; _edge_sample says why
            values = _thresholds.threshold_values(thresholds, half[spec.name])
            seed = _recipe.input_seed(plan.seed, sample_id, spec.name)
            pools[spec.name] = _thresholds.threshold_pool(values, half[spec.name], seed, numel)
    return _EdgeDraw(_recipe.THRESHOLD, pools, _thresholds.note(thresholds, {n: half[n] for n in pools}))


def _edge_sample(plan: _Plan, env: Mapping[str, int], draw: _EdgeDraw, notes: list[str]) -> Sample | None:
    """The edge sample ``draw`` describes, at ``env``; None (and a note) when it cannot be generated."""
    sample_id = _recipe.edge_sample_id(draw.edge)
    edged = dict(plan.templates)
    for n, pool in draw.pools.items():
        edged[n] = _recipe.Template("pool", pool=pool, key=f"{pool_key(n)}.{sample_id}")
    pools = {t.key or pool_key(n): t.pool for n, t in edged.items() if t.kind == "pool"}
    try:
        leaves, recipes = _generate(replace(plan, templates=edged, pools=pools), env, sample_id)
    except (_symexpr.ExprError, RuntimeError, ValueError) as exc:
        notes.append(f"sample {sample_id} not generated: {exc}")
        return None
    used = {r.pool for r in recipes if r.pool is not None}
    return Sample(sample_id, dict(env), leaves, note=draw.note, recipes=recipes, pools={k: pools[k] for k in used}, edge=draw.edge)


def _span(bounds: tuple[float, float]) -> str:
    return f"{bounds[0]:.3g}..{bounds[1]:.3g}"


def pool_key(name: str) -> str:
    """The golden-file key of an input's value pool (one per input, shared by its samples)."""
    return f"pool.{name}"


@dataclass(frozen=True)
class _Plan:
    """What every generated sample of a build is made from: the contract, the example's leaves,
    each input's value template and value pools, and the build's seed."""

    contract: IOContract
    example_leaves: Sequence[Any]
    templates: Mapping[str, _recipe.Template]
    pools: Mapping[str, Any]
    seed: int


def _generate(plan: _Plan, env: Mapping[str, int], sample_id: str) -> tuple[list[Any], list[InputRecipe]]:
    """One sample's leaves (constants as in the example) and its inputs' recipes, hashed."""
    import dataclasses

    contract, example_leaves, templates, pools, seed = plan.contract, plan.example_leaves, plan.templates, plan.pools, plan.seed
    recipes: list[InputRecipe] = []
    reads = {s.value_of: s.name for s in contract.symbols if s.value_of is not None}
    for spec in contract.inputs:
        if spec.tensor is None or spec.name not in templates:
            continue
        shape, stride = _shape_and_stride(spec.tensor, env)
        t = templates[spec.name]
        if spec.name in reads:  # its value is a symbol of the sample (x.item()): every element holds it
            t = _recipe.Template("ids", low=env[reads[spec.name]], high=env[reads[spec.name]])
        recipes.append(
            _recipe.recipe(
                spec.name,
                t,
                t.key or pool_key(spec.name),
                _recipe.Sized(spec.tensor.dtype, shape, stride),
                _recipe.input_seed(seed, sample_id, spec.name),
            )
        )
    made = _recipe.generate(recipes, pools)
    recipes = [dataclasses.replace(r, sha256=_recipe.sha256_of(made[r.input])) for r in recipes]
    leaves: list[Any] = []
    for spec, value in zip(contract.inputs, example_leaves):
        if spec.tensor is None:
            leaves.append(value)
        elif spec.name in made:
            leaves.append(made[spec.name])
        else:  # a dtype the generator does not make (complex): zeros at the sample's sizes
            shape, stride = _shape_and_stride(spec.tensor, env)
            leaves.append(_zeros(value, shape, stride))
    return leaves, recipes


def coverage(
    contract: IOContract, samples: Sequence[Sample], *, guards_accepted: bool = False
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Which values each free symbol took over ``samples``, and the symbols whose min or max no
    sample reached (the gaps a partial build would hide).

    ``guards_accepted`` (--allow-export-guards): a symbol an export guard restricts is not a gap
    (its bounds may break the guard; its table row names the guards instead)."""
    table: dict[str, dict[str, Any]] = {}
    gaps: list[str] = []
    restricted: dict[str, list[str]] = {}
    for g in (contract.guards or ()) if guards_accepted else ():
        try:
            for name in _symexpr.free_symbols(g.expr or ""):
                restricted.setdefault(name, []).append(g.words)
        except _symexpr.ExprError:
            continue
    carried = {s.name for s in contract.symbols if s.value_of is not None}
    for spec in contract.inputs:
        for d in spec.tensor.shape if spec.tensor is not None else ():
            try:
                carried |= _symexpr.free_symbols(d.expr) if isinstance(d, Dim) else set()
            except _symexpr.ExprError:
                continue
    for sym in contract.symbols:
        seen = sorted({s.symbols[sym.name] for s in samples if sym.name in s.symbols})
        table[sym.name] = {"min": sym.min, "max": sym.max, "tested": seen}
        if sym.name not in carried:  # an output's data-dependent size (y[:b]): no input sets it
            table[sym.name]["output_only"] = True
            continue
        if sym.name in restricted:
            table[sym.name]["restricted_by"] = restricted[sym.name]
            continue
        if not seen:
            gaps.append(f"{sym.name}: no sample gave it a value")
            continue
        if sym.min not in seen:
            gaps.append(f"{sym.name}: its minimum {sym.min} was not tested")
        if sym.max is not None and sym.max not in seen:
            gaps.append(f"{sym.name}: its maximum {sym.max} was not tested")
    return table, gaps


def _fmt(env: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items()))


def stored_floor(dtype: str) -> tuple[float, float] | None:
    """The stored rule's (atol floor, rtol) for ``dtype``; None: compared exactly (integers, bools)."""
    if dtype not in RTOL_FLOOR:
        return None
    return ATOL_FLOOR[dtype], RTOL_FLOOR[dtype]


def excess_error(compiled: Any, eager: Any, rtol: float, device: str | None = None) -> float:
    """max(0, |compiled - eager| - rtol * |eager|) over elements, ignoring matching non-finite values
    (chunk by chunk: runtime_probe.runtime.numerics says why)."""
    import torch

    if compiled.numel() == 0 or not (compiled.is_floating_point() or compiled.is_complex()):
        return 0.0
    wide = torch.complex128 if compiled.is_complex() else torch.float64
    worst = 0.0
    for c_part, e_part in _numerics.flat_chunks(compiled, eager, device=device):
        c, e = c_part.to(wide), e_part.to(wide)
        same = (c == e) | (torch.isnan(c) & torch.isnan(e))
        diff = torch.where(same, torch.zeros_like(c.real if c.is_complex() else c), (c - e).abs())
        excess = (diff - rtol * torch.nan_to_num(e.abs(), nan=0.0, posinf=0.0)).clamp_min(0.0)
        worst = max(worst, float(torch.nan_to_num(excess, nan=float("inf"), posinf=float("inf")).max().item()))  # never finfo.max
    return worst


@dataclass
class ToleranceStats:
    """One output's (compiled, eager) differences, gathered a sample at a time: the recorded
    tolerance and the measured errors without holding any sample's tensors."""

    output: str
    dtype: str
    device: str | None = None  # where the arithmetic runs (runtime_probe.runtime.numerics.flat_chunks)
    excess: float = 0.0
    max_abs: float = 0.0
    max_rel: float = 0.0

    def add(self, compiled: Any, eager: Any) -> None:
        floors = stored_floor(self.dtype)
        if floors is None or compiled.numel() == 0:
            return  # integers and bools compare exactly; nothing to measure
        self.excess = max(self.excess, excess_error(compiled, eager, floors[1], self.device))
        self.max_abs = max(self.max_abs, _numerics.max_abs_diff(compiled, eager, device=self.device))
        self.max_rel = max(self.max_rel, _numerics.max_rel_diff(compiled, eager, device=self.device))

    def tolerance(self, sample: str | None = None) -> Tolerance:
        """The stored tolerance, with ``origin``: the dtype's floor, or MARGIN times the excess
        (``sample``: the one that set it, named there)."""
        floors = stored_floor(self.dtype)
        if floors is None:
            return Tolerance(self.output, 0.0, 0.0, 0.0, 0.0, origin=f"exact: {self.dtype}")
        floor, rtol = floors
        atol = max(floor, MARGIN * self.excess) if math.isfinite(self.excess) else floor
        origin = f"{self.dtype} floor" if atol == floor else f"{MARGIN:g} x the measured excess {self.excess:.3g}"
        if atol != floor and sample is not None:
            origin += f" on sample {sample}"
        return Tolerance(self.output, atol, rtol, _clean(self.max_abs), _clean(self.max_rel), origin=origin)


def _clean(value: float) -> float:
    return value if math.isfinite(value) else 0.0
