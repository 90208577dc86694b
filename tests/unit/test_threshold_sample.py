"""The value-aware ``edge-threshold`` golden sample (issue 42, pytorch#128306): the constants an
exported program compares float16/bfloat16 tensors with (aoti_guard/builder/thresholds.py), the
values around them, the sample golden.py makes from them, and how compare.py judges a flip on it.

torch 2.13 compiles ``bf16 > 0.2`` like eager, so these test the mechanism; the flip itself is
built on torch 2.13 by tests/integration/test_half_precision.py (a cast Inductor elides)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from aoti_guard.builder.golden import Sample, make_samples  # noqa: E402
from aoti_guard.builder.thresholds import MAX_CONSTANTS, comparison_constants, threshold_pool, threshold_values  # noqa: E402
from aoti_guard.builder.validate.compare import Comparison  # noqa: E402
from aoti_guard.builder.validate.run import example_leaves  # noqa: E402
from aoti_guard.builder.validate.tolerance import ToleranceRule  # noqa: E402
from runtime_probe.golden import recipe as R  # noqa: E402
from runtime_probe.golden.sample_rule import sample_rule  # noqa: E402
from runtime_probe.package.manifest import InputRecipe, InputSpec, IOContract, OutputSpec, TensorSpec  # noqa: E402
from tests.realbugs.models import Threshold, bf16_threshold  # noqa: E402

BF16_02 = 0.2001953125  # 0.2 as bfloat16 rounds it (eager's constant in `bf16 > 0.2`)


class _Compares(torch.nn.Module):
    """Every way a half-precision tensor meets a constant that comparison_constants reads."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("limit", torch.tensor(0.75))

    def forward(self, s: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            (s > 0.2).to(torch.float32),
            h >= -1.5,
            torch.where(h < torch.tensor(0.3, dtype=torch.float16), h, 0.0),  # a lifted 0-d constant
            torch.clamp(s, min=0.1, max=0.9),
            h < self.limit,  # a 0-d buffer
            torch.eq(s, 2),
            h.float() > 0.7,  # compared in float32: not a half-precision comparison
            s * 3.0,  # not a comparison
        )


def test_the_constants_compared_with_half_precision_tensors_are_read_from_the_program() -> None:
    ep = torch.export.export(_Compares(), (torch.rand(1, 4).bfloat16(), torch.rand(1, 4).half()))
    found = comparison_constants(ep)
    assert found == (0.2, -1.5, float(torch.tensor(0.3, dtype=torch.float16)), 0.1, 0.9, 0.75, 2.0), found
    assert 0.7 not in found and 3.0 not in found


def test_the_threshold_models_constant_is_found_and_a_model_without_comparisons_has_none() -> None:
    model, args = bf16_threshold()
    assert comparison_constants(torch.export.export(model, args)) == (0.2,)
    plain = torch.export.export(torch.nn.Linear(4, 4).bfloat16(), (torch.rand(2, 4).bfloat16(),))
    assert comparison_constants(plain) == ()


def test_at_most_max_constants_are_kept() -> None:
    class Many(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stack([x > i / 100 for i in range(MAX_CONSTANTS + 5)])

    assert len(comparison_constants(torch.export.export(Many(), (torch.rand(4).half(),)))) == MAX_CONSTANTS


def test_the_pool_holds_the_rounded_constant_its_neighbours_and_both_signs_of_a_negative_one() -> None:
    values = threshold_values([0.2], "bfloat16")
    assert values[:3] == [BF16_02, 0.201171875, 0.19921875], values  # bf16(0.2) first, then next above and below
    half = threshold_values([-1.5], "float16")
    assert {-1.5, -1.5 + 2**-10, -1.5 - 2**-10, 1.5, 1.5 - 2**-10, 1.5 + 2**-10} == set(half), half
    assert threshold_values([1e6], "float16") == [65504.0], "beyond the dtype: its largest finite value only"


@pytest.mark.parametrize("numel", [1, 3, 4, 7, 50])
@pytest.mark.parametrize("seed", [0, 1, 123456789])
def test_the_most_telling_values_land_on_the_inputs_first_elements(numel: int, seed: int) -> None:
    values = threshold_values([0.2, -1.5, 0.7], "bfloat16")
    pool = threshold_pool(values, "bfloat16", seed, numel)
    r = InputRecipe("x", "pool", "bfloat16", (numel,), (1,), seed, "", "p")
    made = R.generate([r], {"p": pool})["x"].double().tolist()  # the probe's regeneration
    placed = min(numel, len(values))
    assert made[:placed] == values[:placed]
    assert set(made) <= set(values)


def _contract(dtype: str, name: str = "scores") -> IOContract:
    spec = InputSpec(name, name, "tensor", 0, TensorSpec(dtype, (1, 4), (4, 1), True, "cpu"))
    return IOContract((), (spec,), (OutputSpec("y", TensorSpec("float32", (1, 4), (4, 1), True, "cpu")),), ())


def test_the_threshold_model_gets_an_edge_threshold_sample_at_the_rounded_constant_that_the_probe_regenerates() -> None:
    model, args = bf16_threshold()
    ep = torch.export.export(model, args)
    samples, notes = make_samples(_contract("bfloat16"), example_leaves(ep), thresholds=comparison_constants(ep))
    (s,) = [s for s in samples if s.id == "edge-threshold"]
    assert notes == [] and s.edge == R.THRESHOLD and s.id in R.EDGE_SAMPLE_IDS
    assert BF16_02 in s.leaves[0].double().flatten().tolist()
    assert "0.2 (bfloat16 0.2001953125)" in s.note and "scores (bfloat16)" in s.note
    made = R.generate(s.recipes, s.pools)
    assert made["scores"].equal(s.leaves[0]) and R.sha256_of(made["scores"]) == s.recipes[0].sha256
    assert Threshold()(s.leaves[0]).flatten().tolist()[0] == 0.0, "eager: bf16 0.2002 is not above bf16(0.2)"


@pytest.mark.parametrize(
    ("dtype", "name", "thresholds"), [("bfloat16", "scores", ()), ("float32", "scores", (0.2,)), ("float16", "mask", (0.5,))]
)
def test_no_threshold_sample_without_constants_for_a_float32_input_or_for_a_mask(
    dtype: str, name: str, thresholds: tuple[float, ...]
) -> None:
    example = [torch.rand(1, 4).to(getattr(torch, dtype))]
    without, _ = make_samples(_contract(dtype, name), example)
    samples, _ = make_samples(_contract(dtype, name), example, thresholds=thresholds)
    assert "edge-threshold" not in [s.id for s in samples]
    assert [s.id for s in samples] == [s.id for s in without], "the build is otherwise unchanged"


def _judge(sample_id: str) -> list[str]:
    """A 0/1 output flipped where the float64 copy agrees with the package (0.2002 > 0.2 in float64)."""
    eager = torch.tensor([[0.0, 1.0, 0.0, 1.0]])
    compiled = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    comparison = Comparison(_contract("bfloat16"), allow_nonfinite=False, tolerance=ToleranceRule())
    comparison.add(Sample(sample_id, {}, [], outputs=[eager]), [compiled], [compiled.clone()])
    return [f"{f.severity.value}:{f.code}" for f in comparison.finish().findings]


def test_a_flip_on_the_threshold_sample_fails_even_where_float64_agrees_with_the_package() -> None:
    assert _judge("edge-threshold") == ["error:build.validation_failed"]
    assert "error:build.validation_failed" not in _judge("mid"), (
        "elsewhere the float64 rule still accepts a package as close to float64 as eager"
    )
    rule = sample_rule("edge-threshold", allow_nonfinite=False)
    assert rule.own_tolerance and not rule.fp64_accepts and sample_rule("edge-rounding", allow_nonfinite=False).fp64_accepts
