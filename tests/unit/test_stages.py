"""The stage bisection's verdicts (stages.py) and the comparison rules that keep eager's noise out
of a tolerance (compare.py): pure functions over rows and real tensors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from aoti_guard.builder.golden import Sample  # noqa: E402
from aoti_guard.builder.validate import stages  # noqa: E402
from aoti_guard.builder.validate.compare import Comparison  # noqa: E402
from aoti_guard.builder.validate.tolerance import ToleranceRule  # noqa: E402
from runtime_probe.package.manifest import IOContract, OutputSpec, TensorSpec  # noqa: E402

A, D, R, S = stages.AGREES, stages.DEPARTS, stages.RAISED, stages.SKIPPED


def _rows(**status: str) -> list[stages.StageRow]:
    return [stages.StageRow(name, st, 0.5 if st == D else (0.0 if st == A else None)) for name, st in status.items()]


def _sample() -> Sample:
    return Sample("min", {"batch": 2}, [])


@pytest.mark.parametrize(
    ("rows", "first", "words"),
    [
        (_rows(eager=D, export=D, decompose=D, inductor=S, package=D), "eager", "eager itself"),
        (_rows(eager=A, export=R, decompose=R, inductor=S, package=D), "export", "torch.export"),
        (_rows(eager=A, export=A, decompose=D, inductor=S, package=D), "decompose", "decompositions"),
        (_rows(eager=A, export=A, decompose=A, inductor=D, package=D), "inductor", "is Inductor"),
        (_rows(eager=A, export=A, decompose=A, inductor=A, package=D), "package", "AOTInductor package"),
        (_rows(eager=A, export=A, decompose=A, inductor=R, package=D), "package", "is not known"),
    ],
)
def test_the_first_departing_stage_is_named(rows: list[stages.StageRow], first: str, words: str) -> None:
    f = stages.stage_finding(rows, _sample())
    assert f.severity.value == "error" and f.evidence["first"] == first and words in f.message
    assert len(f.evidence["stages"]) == len(rows)


def test_an_export_guard_failure_names_the_guard_not_the_compiler() -> None:
    rows = [
        stages.StageRow("eager", A, 0.0),
        stages.StageRow("export", R, note="AssertionError: Guard failed: x.size()[1] * x.size()[2] == 64"),
        stages.StageRow("package", D, 2.1),
    ]
    f = stages.stage_finding(rows, _sample())
    assert "Guard failed: x.size()[1] * x.size()[2] == 64" in f.message and "does not enforce" in f.message
    assert "compiler" not in f.message.lower()


def test_no_departure_on_rerun_is_a_warning_not_a_cause() -> None:
    f = stages.stage_finding(_rows(eager=A, export=A, decompose=A, inductor=S, package=A), _sample())
    assert f.severity.value == "warning" and "did not reproduce" in f.message and "first" not in f.evidence


def _contract() -> IOContract:
    return IOContract((), (), (OutputSpec("y", TensorSpec("float32", (4096,), (1,), True, "cpu")),), ())


def _fp64_case() -> tuple[Sample, list[object], list[object]]:
    """compiled off eager by 0.05 but, with eager off float64 by as much, as close to float64."""
    gen = torch.Generator().manual_seed(0)
    ref64 = torch.randn(4096, generator=gen, dtype=torch.float64)
    eager = (ref64 + 0.05 * torch.randn(4096, generator=gen, dtype=torch.float64)).float()
    compiled = (ref64 + 0.05 * torch.randn(4096, generator=gen, dtype=torch.float64)).float()
    return Sample("max", {}, [], [eager]), [compiled], [ref64]


def test_the_float64_rule_widens_a_tolerance_only_with_a_warning_that_says_why() -> None:
    s, compiled, refs = _fp64_case()
    comparison = Comparison(_contract(), allow_nonfinite=False, tolerance=ToleranceRule())
    comparison.add(s, compiled, refs)
    result = comparison.finish()
    [row] = result.table
    assert row["passed"] is False and row["verdict"] == "pass" and row["accepted_by"] == "fp64"
    [wide] = [f for f in result.findings if f.code == "build.tolerance_wide"]
    assert "as close to float64 as eager" in wide.message and "sample max" in wide.message
    assert result.tolerances[0].atol > 100 * 1e-5
    [margin] = result.margins
    assert margin["sample"] == "max" and margin["accepted_by"] == "fp64" and margin["stored_atol"] == result.tolerances[0].atol


def test_without_a_repeatable_eager_the_float64_rule_is_off() -> None:
    s, compiled, refs = _fp64_case()
    comparison = Comparison(_contract(), allow_nonfinite=False, tolerance=ToleranceRule(), fp64_rule=False)
    comparison.add(s, compiled, refs)
    result = comparison.finish()
    assert result.table[0]["verdict"] == "fail"
    assert [f.code for f in result.findings] == ["build.validation_failed"]  # no tolerance widened, no warning


def test_eager_repeat_compares_two_calls() -> None:
    out = torch.arange(4.0)
    same = stages.eager_repeat(_contract(), [out], out.clone(), ToleranceRule())
    assert same is not None and same["status"] == A and same["max_abs"] == 0.0
    moved = stages.eager_repeat(_contract(), [out], out + 1.0, ToleranceRule())
    assert moved is not None and moved["status"] == D and moved["max_abs"] == 1.0
