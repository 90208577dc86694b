"""Half precision at the dtype's edge: the edge recipes (runtime_probe/golden/recipe.py), the edge
samples golden.py makes from them, how compare.py judges their NaN/Inf, and the finding the
precision-cast remedy (validate/precision.py) turns ``build.first_divergence`` into."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from aoti_guard.builder.golden import Sample, ToleranceStats, make_samples  # noqa: E402
from aoti_guard.builder.minify import driver as minify  # noqa: E402
from aoti_guard.builder.validate import precision, stages  # noqa: E402
from aoti_guard.builder.validate.compare import Comparison  # noqa: E402
from aoti_guard.builder.validate.tolerance import ToleranceRule  # noqa: E402
from aoti_guard.builder.validate.verdict import close_to_fp64  # noqa: E402
from runtime_probe.golden import recipe as R  # noqa: E402
from runtime_probe.package.manifest import InputSpec, IOContract, OutputSpec, TensorSpec  # noqa: E402
from runtime_probe.reporting.findings import Finding  # noqa: E402
from runtime_probe.reporting.report import PhaseResult  # noqa: E402
from runtime_probe.runtime import numerics  # noqa: E402

F16_MAX = 65504.0


def _input(name: str, dtype: str, index: int = 0) -> InputSpec:
    return InputSpec(name, name, "tensor", index, TensorSpec(dtype, (4, 8), (8, 1), True, "cpu"))


def _contract(*inputs: InputSpec, out: str = "float16") -> IOContract:
    return IOContract((), tuple(inputs), (OutputSpec("y", TensorSpec(out, (4, 8), (8, 1), True, "cpu")),), ())


def test_only_float16_and_bfloat16_have_edge_recipes_and_only_bfloat16_a_rounding_one() -> None:
    assert [e.name for e in R.edges_for("float16")] == ["overflow", "max"]
    assert [e.name for e in R.edges_for("bfloat16")] == ["overflow", "max", "rounding"]
    assert R.edges_for("float32") == [] and R.edges_for("int64") == []


def test_the_overflow_pool_makes_products_that_overflow_float16_and_some_that_do_not() -> None:
    edge = next(e for e in R.EDGES if e.name == "overflow")
    pool = R.edge_pool(torch.rand(16, dtype=torch.float16) + 0.1, "float16", edge)  # a positive example
    assert pool.dtype == torch.float16 and bool((pool > 0).all()), "the example's signs: positive stays positive"
    squares = pool * pool  # float16 arithmetic, as eager does it
    assert bool(torch.isinf(squares).any()) and bool(torch.isfinite(squares).any())
    assert bool(torch.isfinite(pool).all()) and float(pool.abs().max()) < F16_MAX


def test_an_edge_pool_takes_the_examples_signs_in_turn() -> None:
    edge = next(e for e in R.EDGES if e.name == "max")
    pool = R.edge_pool(torch.tensor([-1.0, 2.0, 0.0], dtype=torch.float16), "float16", edge)
    assert pool[0] < 0 and pool[1] > 0 and pool[2] > 0 and pool[3] < 0
    assert bool(torch.isinf(pool * 2).any()), "near max: a doubling overflows"


def test_the_bfloat16_rounding_pool_holds_exact_values_whose_sums_round() -> None:
    edge = next(e for e in R.EDGES if e.name == "rounding")
    pool = R.edge_pool(torch.ones(4, dtype=torch.bfloat16), "bfloat16", edge)
    wide = pool.double()
    assert float(wide.min()) >= 2.0**-8 and float(wide.max()) <= 2.0**9
    pairs = wide[:, None] + wide[None, :]
    rounded = (pool[:, None] + pool[None, :]).double()  # bfloat16 arithmetic rounds each sum
    assert bool((rounded != pairs).any()), "some sums of two values are not bfloat16 numbers"


def test_a_half_model_gets_one_sample_per_edge_recipe_that_the_probe_regenerates_bit_exactly() -> None:
    contract = _contract(_input("x", "float16"), _input("m", "float32", 1))
    example = [torch.randn(4, 8, dtype=torch.float16), torch.randn(4, 8)]
    samples, notes = make_samples(contract, example)
    edges = [s for s in samples if s.edge]
    assert notes == [] and [s.id for s in edges] == ["edge-overflow", "edge-max"]
    for s in edges:
        assert "x (float16)" in s.note and s.edge in s.note
        x = next(r for r in s.recipes if r.input == "x")
        assert x.kind == "pool" and x.pool == f"pool.x.{s.id}" and x.pool in s.pools
        made = R.generate(s.recipes, s.pools)  # what the probe does with a compact sample
        assert made["x"].equal(s.leaves[0]) and made["m"].equal(s.leaves[1])
        assert R.sha256_of(made["x"]) == x.sha256
    low, high = next(e for e in R.EDGES if e.name == "overflow").magnitudes("float16")
    assert low <= float(edges[0].leaves[0].abs().min()) and float(edges[0].leaves[0].abs().max()) <= high + 1
    assert edges[0].leaves[1].abs().max() < 10, "a float32 input keeps its example's values"


@pytest.mark.parametrize(("dtype", "name"), [("float32", "x"), ("float16", "attention_mask")])
def test_no_edge_sample_for_a_float32_input_or_a_half_mask(dtype: str, name: str) -> None:
    samples, _ = make_samples(_contract(_input(name, dtype)), [torch.randn(4, 8).to(getattr(torch, dtype))])
    assert [s.id for s in samples] == ["example"]


def _judge(sample: Sample, compiled: torch.Tensor, eager: torch.Tensor, fp64: torch.Tensor | None = None) -> list[str]:
    sample.outputs = [eager]
    comparison = Comparison(_contract(_input("x", "float16")), allow_nonfinite=False, tolerance=ToleranceRule())
    comparison.add(sample, [compiled], [fp64] if fp64 is not None else None)
    return [f.code for f in comparison.finish().findings]


def test_an_edge_sample_that_overflows_where_eager_does_passes() -> None:
    eager = torch.full((4, 8), math.inf, dtype=torch.float16)
    eager[0, 0] = 3.0
    assert _judge(Sample("edge-overflow", {}, [], edge="overflow"), eager.clone(), eager) == []


def test_a_finite_value_where_eager_overflows_never_passes_not_even_by_the_float64_rule() -> None:
    # x = 300: eager's y = x*x is inf, so y/x is inf; the package kept y in float32: 300 (float64: 300)
    eager = torch.full((4, 8), math.inf, dtype=torch.float16)
    compiled = torch.full((4, 8), 300.0, dtype=torch.float16)
    fp64 = torch.full((4, 8), 300.0, dtype=torch.float64)
    assert _judge(Sample("edge-overflow", {}, [], edge="overflow"), compiled, eager, fp64) == ["build.validation_failed"]
    assert _judge(Sample("mid", {}, []), compiled, eager, fp64) == ["build.validation_failed"]
    assert close_to_fp64(compiled, eager, fp64, 1e-2)[0] is False


def test_inf_against_a_finite_value_is_reported_as_inf_and_stores_no_infinite_tolerance() -> None:
    eager = torch.full((8,), math.inf, dtype=torch.float16)
    compiled = torch.full((8,), 300.0, dtype=torch.float16)
    st = numerics.stats(compiled, eager, atol=1e-2, rtol=1e-2, equal_nan=True)
    assert st["passed"] is False and st["max_abs"] == "inf"
    stats = ToleranceStats("y", "float16")
    stats.add(compiled, eager)
    assert math.isfinite(stats.tolerance().atol)


def test_same_nonfinite_tells_places_and_values_apart() -> None:
    a = torch.tensor([1.0, math.inf, math.nan])
    assert numerics.same_nonfinite(a, a.clone())
    assert not numerics.same_nonfinite(a, torch.tensor([1.0, 2.0, math.nan]))
    assert not numerics.same_nonfinite(a, torch.tensor([1.0, -math.inf, math.nan]))


def _divergence() -> Finding:
    rows = [stages.StageRow(s, stages.AGREES, 0.0) for s in ("eager", "export", "decompose")]
    rows += [stages.StageRow("inductor", stages.DEPARTS, math.inf), stages.StageRow("package", stages.DEPARTS, math.inf)]
    return stages.stage_finding(rows, Sample("edge-overflow", {}, []))


def test_a_verified_remedy_names_the_cause_and_the_flag() -> None:
    f = precision.with_remedy(_divergence(), precision.Remedy(True, "float16", "edge-overflow", 0.0))
    assert "Inductor elides the float16 casts eager performs (upcast intermediates)" in f.message and "VERIFIED" in f.message
    assert f.hint is not None and precision.FLAG in f.hint and "verified on sample edge-overflow" in f.hint
    assert f.evidence["remedy"]["verified"] is True and f.evidence["cause"] == "precision_cast_elision"
    assert not minify.bisected_to_compiler([PhaseResult("validate", "failed", 1.0, (f,))]), "a verified cause needs no minifier"


def test_a_remedy_that_does_not_help_is_not_offered() -> None:
    before = _divergence()
    f = precision.with_remedy(before, precision.Remedy(False, "float16", "edge-overflow", 2.5))
    assert "still differs" in f.message and f.hint == before.hint and "VERIFIED" not in f.message
    assert f.evidence["remedy"]["verified"] is False and "cause" not in f.evidence
    assert minify.bisected_to_compiler([PhaseResult("validate", "failed", 1.0, (f,))])


def test_the_remedy_is_tried_only_on_a_half_program_whose_compiler_departs_first() -> None:
    class Half(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * x

    ep16 = torch.export.export(Half(), (torch.randn(4, dtype=torch.float16),))
    ep32 = torch.export.export(Half(), (torch.randn(4),))
    compiler = [stages.StageRow("eager", stages.AGREES, 0.0), stages.StageRow("inductor", stages.DEPARTS, 1.0)]
    assert precision.candidate(ep16, compiler, {}) == "float16"
    assert precision.candidate(ep32, compiler, {}) is None
    assert precision.candidate(ep16, compiler, {precision.CONFIG: True}) is None
    assert precision.candidate(ep16, [stages.StageRow("eager", stages.DEPARTS, 1.0)], {}) is None


def test_an_infinite_error_reaches_the_manifest_as_text() -> None:
    # the manifest is JSON without Infinity: a rejected float16 package could not be written
    assert json.dumps(stages.StageRow("package", stages.DEPARTS, math.inf).to_dict(), allow_nan=False)
    comparison = Comparison(_contract(_input("x", "float16")), allow_nonfinite=False, tolerance=ToleranceRule())
    sample = Sample("edge-overflow", {}, [], outputs=[torch.full((4, 8), math.inf, dtype=torch.float16)], edge="overflow")
    comparison.add(sample, [torch.full((4, 8), 300.0, dtype=torch.float16)], [torch.full((4, 8), 300.0, dtype=torch.float64)])
    table = comparison.finish().table
    assert table[0]["rmse_eager_vs_fp64"] == "inf" and json.dumps(table, allow_nan=False)
