"""The three-way verdict (eager, AOTI, ONNX Runtime) on synthetic tensors."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from aoti_guard.builder.golden import Sample
from aoti_guard.builder.validate.tolerance import ToleranceRule
from aoti_guard.builder.validate.verdict import (
    AGREE,
    COMPILER,
    NONE,
    NUMERICS,
    Results,
    SampleRuns,
    classify,
    compare_pair,
    judge_sample,
    three_way,
    verdict_findings,
)
from runtime_probe.package.manifest import IOContract, OutputSpec, TensorSpec

TOL = {"atol": 1e-4, "rtol": 1e-4}


def _x(seed: int = 0, shape: tuple[int, ...] = (4, 8)) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    ("aoti_eager", "ort_eager", "expected"),
    [
        (True, True, AGREE),
        (False, True, COMPILER),
        (True, False, NUMERICS),
        (False, False, NUMERICS),
        (True, None, NONE),
        (False, None, NONE),
    ],
)
def test_classify_table(aoti_eager: bool, ort_eager: bool | None, expected: str) -> None:
    assert classify(aoti_eager, ort_eager) == expected


def test_all_agree() -> None:
    eager = _x()
    r = three_way("example", "out", Results(eager, eager + 1e-7, eager - 1e-7), atol=1e-4, rtol=1e-4)
    assert r.verdict == AGREE
    assert r.aoti_eager.agree and r.ort_eager is not None and r.ort_eager.agree
    assert r.aoti_ort is not None and r.aoti_ort.agree and isinstance(r.aoti_ort.max_abs, float)
    assert r.columns()["reference_verdict"] == "agree" and r.columns()["ort_vs_eager_max_abs"] == pytest.approx(1e-7, rel=0.5)


def test_aoti_alone_wrong_is_a_compiler_problem() -> None:
    eager = _x()
    aoti = eager.clone()
    aoti[0, 0] += 1.0  # like the injected relu bug: off by one somewhere
    r = three_way("example", "out", Results(eager, aoti, eager.clone()), **TOL)
    assert r.verdict == COMPILER
    assert r.aoti_eager.max_abs == pytest.approx(1.0) and r.ort_eager is not None and r.ort_eager.max_abs == 0.0
    assert r.aoti_ort is not None and not r.aoti_ort.agree
    (f,) = verdict_findings([r])
    assert f.code == "build.compiler_suspect" and f.severity.value == "error"
    assert "likely a compiler problem" in f.message and "--minify" in (f.hint or "")
    assert f.evidence["samples"] == ["example"]


def test_ort_differs_is_numerics_warning_not_error() -> None:
    eager = _x()
    r = three_way("max", "out", Results(eager, eager.clone(), eager + 0.5), **TOL)
    assert r.verdict == NUMERICS
    (f,) = verdict_findings([r])
    assert f.code == "build.reference_disagrees" and f.severity.value == "warning"
    assert "AOTInductor agrees with eager" in f.message and "nondeterminism" in f.message


def test_eager_odd_one_out_is_numerics() -> None:
    eager = _x()
    other = eager + 0.5
    r = three_way("mid", "out", Results(eager, other, other.clone()), **TOL)
    assert r.verdict == NUMERICS
    (f,) = verdict_findings([r])
    assert "eager is the odd one out" in f.message


def test_fp64_rule_lets_a_more_accurate_result_agree() -> None:
    # eager is off from the float64 truth; AOTI is closer to it: that is not a disagreement.
    truth = _x(1).to(torch.float64)
    eager = (truth + 1e-3).to(torch.float32)
    aoti = truth.to(torch.float32)
    assert not compare_pair(aoti, eager, atol=1e-4, rtol=1e-4).agree
    assert compare_pair(aoti, eager, truth, atol=1e-4, rtol=1e-4).agree
    assert three_way("example", "out", Results(eager, aoti, eager.clone(), truth), **TOL).verdict == AGREE


def test_shape_and_dtype_mismatches_disagree() -> None:
    eager = _x()
    wrong_shape = compare_pair(eager[:2], eager, atol=1e-4, rtol=1e-4)
    assert not wrong_shape.agree and wrong_shape.reason == "shape"
    assert not compare_pair(eager.double(), eager, atol=1e-4, rtol=1e-4).agree


def test_integer_outputs_compare_exactly() -> None:
    ids = torch.arange(10)
    assert three_way("example", "ids", Results(ids, ids.clone(), ids.clone()), atol=0.0, rtol=0.0).verdict == AGREE
    off = ids.clone()
    off[3] = 99
    assert three_way("example", "ids", Results(ids, off, ids.clone()), atol=0.0, rtol=0.0).verdict == COMPILER


def test_matching_nans_agree_when_asked() -> None:
    eager = torch.tensor([1.0, float("nan"), 3.0])
    assert three_way("example", "out", Results(eager, eager.clone(), eager.clone()), equal_nan=True, **TOL).verdict == AGREE
    aoti_nan = torch.tensor([float("nan"), 2.0, 3.0])
    assert (
        three_way(
            "example", "out", Results(torch.tensor([1.0, 2.0, 3.0]), aoti_nan, torch.tensor([1.0, 2.0, 3.0])), equal_nan=True, **TOL
        ).verdict
        == COMPILER
    )


def test_no_ort_result_is_none_and_yields_no_finding() -> None:
    eager = _x()
    r = three_way("example", "out", Results(eager, eager + 1.0, None), **TOL)
    assert r.verdict == NONE and r.ort_eager is None and r.columns() == {"reference_verdict": "none"}
    assert verdict_findings([r]) == []


def test_all_agree_gives_one_info_over_outputs_and_samples() -> None:
    e1, e2 = _x(1), _x(2)
    rows = [three_way(s, o, Results(e, e.clone(), e.clone()), **TOL) for s in ("example", "min") for o, e in (("a", e1), ("b", e2))]
    (f,) = verdict_findings(rows)
    assert f.code == "build.references_agree" and f.severity.value == "info"
    assert "2 output(s) of 2 sample(s)" in f.message


def test_findings_group_by_output() -> None:
    eager = _x()
    bad = eager + 1.0
    rows = [three_way(s, "out", Results(eager, bad, eager.clone()), **TOL) for s in ("example", "min", "max")]
    rows.append(three_way("example", "other", Results(eager, eager.clone(), eager.clone()), **TOL))
    findings = verdict_findings(rows, minify=True)
    assert [f.code for f in findings] == ["build.compiler_suspect"]  # no "all agree" while one output is wrong
    assert "3 of 3 sample(s) (example, min, max)" in findings[0].message
    assert "minify phase" in (findings[0].hint or "")


def _contract() -> IOContract:
    spec = TensorSpec("float32", (4, 8), (8, 1), True, "cpu")
    return IOContract(params=(), inputs=(), outputs=(OutputSpec("y", spec), OutputSpec("n", None, 3)), symbols=())


def test_judge_extends_the_table_rows() -> None:
    eager = _x()
    sample = Sample("example", {}, [], [eager, 3])
    table: list[dict[str, Any]] = [{"sample": "example", "output": "y", "verdict": "fail"}]
    compiled = {"example": [eager + 1.0, None]}
    ort = {"example": [eager.clone(), None]}
    results = judge_sample(_contract(), sample, SampleRuns(compiled["example"], ort["example"], None), table, tolerance=ToleranceRule())
    findings = verdict_findings(results)
    assert [f.code for f in findings] == ["build.compiler_suspect"]
    row = table[0]
    assert row["reference_verdict"] == "compiler"
    assert row["ort_vs_eager_max_abs"] == 0.0 and row["aoti_vs_ort_max_abs"] == pytest.approx(1.0)


def test_judge_uses_the_user_tolerance() -> None:
    eager = _x()
    sample = Sample("example", {}, [], [eager, 3])
    table: list[dict[str, Any]] = [{"sample": "example", "output": "y"}]
    results = judge_sample(
        _contract(), sample, SampleRuns([eager + 0.01, None], [eager, None], None), table, tolerance=ToleranceRule(atol=0.1)
    )
    findings = verdict_findings(results)
    assert [f.code for f in findings] == ["build.references_agree"]
