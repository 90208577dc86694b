"""One tolerance (issue 41): the build's ``--atol``/``--rtol`` against the dtype defaults is decided
in ONE function (``builder/validate/tolerance.py::resolve``) and carried as a ``ToleranceRule``
to every reader; the manifest records each output's tolerance once, with its origin.

The source scan (``test_the_default_is_taken_in_one_place``) fails on a default taken anywhere
else in aoti_guard/, runtime_probe/ or zoo/: the table of dtype defaults read outside
tolerance.py, an ``atol if atol is None``-style choice, or a tolerance or a literal picked by a
conditional (``(t.atol, t.rtol) if t else (0.0, 0.0)``), and the stored rule's floors read
outside ``golden.stored_floor``.
"""

from __future__ import annotations

import ast
import json
import math
import runpy
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.pipeline import check_options
from aoti_guard.builder.state import BuildState
from aoti_guard.builder.validate.tolerance import OTHER, ToleranceRule, check_given, resolve
from runtime_probe.package.manifest import CheckTolerance, Tolerance, dump_manifest, parse_manifest, reference_tolerance
from runtime_probe.reporting.errors import UsageError

from .test_manifest import minimal

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("aoti_guard", "runtime_probe", "zoo")
TOLERANCE_PY = "aoti_guard/builder/validate/tolerance.py"
GOLDEN_PY = "aoti_guard/builder/golden.py"
TOL_NAMES = {"atol", "rtol"}


# --- the one decision --------------------------------------------------------------------------


def test_a_dtype_default_says_so() -> None:
    assert resolve(None, None, "float32") == CheckTolerance(1e-4, 1e-4, "float32 default")
    assert resolve(None, None, "bfloat16") == CheckTolerance(5e-2, 5e-2, "bfloat16 default")
    # integers, bools and complex have no default: compared exactly, and the origin says so
    assert resolve(None, None, "int64") == CheckTolerance(0.0, 0.0, "exact: no default for int64")


def test_given_values_win_each_on_its_own() -> None:
    assert resolve(0.5, 0.25, "float16") == CheckTolerance(0.5, 0.25, "--atol/--rtol")
    assert resolve(0.5, None, "float16") == CheckTolerance(0.5, 1e-2, "--atol; rtol: float16 default")
    assert resolve(None, 0.25, "float16") == CheckTolerance(1e-2, 0.25, "--rtol; atol: float16 default")
    # a given atol reaches an integer output too, as it always did
    assert resolve(0.5, None, "int32") == CheckTolerance(0.5, 0.0, "--atol; rtol: exact: no default for int32")


def test_the_rule_takes_torch_dtypes_and_names_alike() -> None:
    torch = pytest.importorskip("torch")
    rule = ToleranceRule(atol=1e-3)
    assert rule.for_dtype(torch.float32) == rule.for_dtype("float32") == CheckTolerance(1e-3, 1e-4, "--atol; rtol: float32 default")


def test_the_repro_table_is_the_builds_for_every_dtype() -> None:
    table = ToleranceRule(atol=0.5).table()
    assert table["float32"] == (0.5, 1e-4) and table["float64"] == (0.5, 1e-6)
    assert table[OTHER] == (0.5, 0.0)  # what the build allows a dtype without a default (was 1e-4 in the repro)
    assert ToleranceRule().table()[OTHER] == (0.0, 0.0)


def test_the_state_makes_the_rule_once_from_the_options(tmp_path: Path) -> None:
    options = BuildOptions(output=str(tmp_path / "m.pt2"), atol=0.01)
    st = BuildState(None, options, str(tmp_path), None, str(tmp_path / "m.pt2"), None, print)  # type: ignore[arg-type]
    assert st.tolerance == ToleranceRule(atol=0.01, rtol=None)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, True, "0.1"])
def test_a_tolerance_that_is_no_number_is_a_usage_error(tmp_path: Path, bad: Any) -> None:
    """``--atol nan`` passed every output: ``diff - nan > 0`` is never true (click's FloatRange
    lets nan and inf through); the library's BuildOptions took a negative one too."""
    with pytest.raises(UsageError, match=r"--atol .* is not a tolerance") as info:
        check_options(BuildOptions(output=str(tmp_path / "m.pt2"), atol=bad))
    assert info.value.exit_code == 2 and "finite number >= 0" in (info.value.hint or "")
    with pytest.raises(UsageError, match="--rtol"):
        check_given(bad, "--rtol")
    check_given(None, "--atol")
    check_given(0, "--atol")


# --- carried to the readers -------------------------------------------------------------------


def _contract(dtype: str = "float32") -> Any:
    from runtime_probe.package.manifest import IOContract, OutputSpec, TensorSpec

    return IOContract((), (), (OutputSpec("y", TensorSpec(dtype, (64,), (1,), True, "cpu")),), ())


def test_the_stage_bisection_judges_by_the_rule() -> None:
    torch = pytest.importorskip("torch")
    from aoti_guard.builder.validate import stages

    ref = torch.zeros(64)
    assert stages.compare_outputs(_contract(), [ref + 0.5], [ref], ToleranceRule())[0] == stages.DEPARTS
    assert stages.compare_outputs(_contract(), [ref + 0.5], [ref], ToleranceRule(atol=1.0))[0] == stages.AGREES


def test_the_manifest_records_each_output_once_with_its_origins() -> None:
    torch = pytest.importorskip("torch")
    from aoti_guard.builder.golden import Sample
    from aoti_guard.builder.validate.compare import CHECK_KEYS, Comparison, manifest_table

    eager = torch.linspace(-1, 1, 64)
    comparison = Comparison(_contract(), allow_nonfinite=False, tolerance=ToleranceRule(atol=1e-3))
    comparison.add(Sample("min", {}, [], [eager]), [eager.clone()], None)
    comparison.add(Sample("max", {}, [], [eager]), [eager + 1e-4], None)
    result = comparison.finish()
    [tol] = result.tolerances
    assert tol.build_check == CheckTolerance(1e-3, 1e-4, "--atol; rtol: float32 default")
    assert tol.atol > 1e-5 and tol.origin is not None and tol.origin.startswith("4 x the measured excess") and "on sample max" in tol.origin
    assert all(row["atol"] == 1e-3 for row in result.table)  # the build report keeps them per row
    assert not any(k in row for row in manifest_table(result.table) for k in CHECK_KEYS)  # the manifest: once, above

    floor = Comparison(_contract(), allow_nonfinite=False, tolerance=ToleranceRule())
    floor.add(Sample("example", {}, [], [eager]), [eager.clone()], None)
    [exact] = floor.finish().tolerances
    assert (exact.atol, exact.origin, exact.build_check) == (1e-5, "float32 floor", CheckTolerance(1e-4, 1e-4, "float32 default"))


def test_the_repro_script_judges_as_the_build(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from aoti_guard.builder.golden import Sample
    from aoti_guard.builder.validate.repro import write_repro
    from aoti_guard.builder.validate.subject import Subject
    from runtime_probe.package.manifest import IOContract, OutputSpec, TensorSpec

    class Twice(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x * 2

    x = torch.ones(3)
    ep = torch.export.export(Twice(), (x,))
    from torch.utils import _pytree as pytree

    in_spec = pytree.treespec_dumps(pytree.tree_flatten(((x,), {}))[1])
    contract = IOContract((), (), (OutputSpec("output", TensorSpec("float32", (3,), (1,), True, "cpu")),), (), in_spec=in_spec)
    options = BuildOptions(output=str(tmp_path / "m.pt2"), device="cpu")
    subject = Subject(ep, Twice(), contract, {}, options, ToleranceRule(atol=0.5))
    path, why = write_repro(subject, Sample("max", {}, [x]))
    assert why is None and path is not None
    script = runpy.run_path(path, run_name="not_main")  # its tables, without running the repro
    assert script["TOLERANCE"]["float32"] == (0.5, 1e-4)
    assert script["DEFAULT_TOLERANCE"] == (0.5, 0.0) and OTHER not in script["TOLERANCE"]


# --- the zoo's judge ---------------------------------------------------------------------------


def test_the_zoos_judge_treats_nan_as_the_build_does() -> None:
    """NaN where the reference has NaN is equal (its own float64 arithmetic failed every NaN:
    ``nan <= x`` is false); NaN where the reference is finite is a mismatch."""
    torch = pytest.importorskip("torch")
    from zoo.guard_golden import _whole

    tol = Tolerance("y", 1e-5, 1.3e-6)
    ref = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    assert _whole(ref.clone(), ref, tol)["passed"] is True
    assert _whole(ref + 1e-7, ref, tol)["passed"] is True
    off = ref.clone()
    off[0] = float("nan")
    judged = _whole(off, ref, tol)
    assert judged["passed"] is False and judged["mismatched"] == 1
    assert _whole(ref + 1e-3, ref, tol)["passed"] is False


def test_the_zoos_judge_is_the_builds_comparison() -> None:
    torch = pytest.importorskip("torch")
    from zoo.guard_golden import _record, _whole

    tol = Tolerance("y", 0.0, 0.0)
    ids = torch.arange(4)
    assert _whole(ids.clone(), ids, tol)["passed"] is True
    other = _whole(ids.float(), ids, tol)  # a dtype that differs fails, as in the build (float64 arithmetic let it pass)
    assert other["passed"] is False and other["reason"] == "dtype"
    failures: list[str] = []
    _record("min", "full", {"count": 1, "expected": 1, "seconds": 0.0}, {"y": _whole(ids[:2], ids, tol)}, failures)
    assert failures == ["min (full): y shape [2], stored [4]"]


# --- the manifest ------------------------------------------------------------------------------


def test_a_1_6_manifest_reads_and_writes_as_before() -> None:
    old = minimal()
    m = parse_manifest(json.dumps(old).encode())
    assert m.golden is not None and m.golden.tolerances[0].origin is None and m.golden.tolerances[0].build_check is None
    [written] = json.loads(dump_manifest(m))["golden"]["tolerances"]
    assert "origin" not in written and "build_check" not in written  # no null keys added


def test_origin_and_build_check_round_trip() -> None:
    data = minimal()
    data["golden"]["tolerances"][0].update(origin="float32 floor", build_check={"atol": 1e-4, "rtol": 1e-4, "origin": "float32 default"})
    m = parse_manifest(json.dumps(data).encode())
    assert m.golden is not None
    assert m.golden.tolerances[0].build_check == CheckTolerance(1e-4, 1e-4, "float32 default")
    assert parse_manifest(dump_manifest(m)) == m


def test_an_output_without_a_stored_tolerance_is_exact() -> None:
    stored = Tolerance("y", 1e-5, 1.3e-6)
    assert reference_tolerance([stored], "y") is stored
    missing = reference_tolerance([stored], "z")
    assert (missing.output, missing.atol, missing.rtol) == ("z", 0.0, 0.0)
    m = parse_manifest(json.dumps(minimal()).encode())
    assert m.reference_tolerance("output").atol == 1e-5
    assert replace(m, golden=None).reference_tolerance("output").atol == 0.0


# --- one place ---------------------------------------------------------------------------------


def _sources(root: Path) -> Iterator[tuple[str, ast.Module]]:
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            yield path.relative_to(root).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _functions(tree: ast.Module) -> dict[ast.AST, str]:
    """Every node -> the name of the innermost function around it ("" at module level)."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else name
            owner[child] = inner
            visit(child, inner)

    visit(tree, "")
    return owner


def _names(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def _literal(node: ast.AST) -> bool:
    """A number, or a tuple/list of numbers: what a default tolerance looks like in code."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    return isinstance(node, ast.Tuple | ast.List) and bool(node.elts) and all(_literal(e) for e in node.elts)


def _is_none_test(test: ast.AST) -> bool:
    return isinstance(test, ast.Compare) and any(isinstance(op, ast.Is | ast.IsNot) for op in test.ops)


def defaults_outside_the_one_function(root: Path) -> list[str]:
    """Each place under ``root`` that takes a tolerance default outside the one function."""
    found = []
    for rel, tree in _sources(root):
        owner = _functions(tree)
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', '?')}"
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if isinstance(node, ast.alias):
                name = node.name
            if name == "BUILD_TOLERANCE" and rel != TOLERANCE_PY:
                found.append(f"{where}: the dtype defaults read outside tolerance.py")
            if name in ("ATOL_FLOOR", "RTOL_FLOOR") and not isinstance(getattr(node, "ctx", None), ast.Store):
                if rel != GOLDEN_PY or owner.get(node) != "stored_floor":
                    found.append(f"{where}: the stored rule's floors read outside golden.stored_floor")
            if isinstance(node, ast.IfExp) and not (rel == TOLERANCE_PY and owner.get(node) == "resolve"):
                test_names, branches = _names(node.test), (node.body, node.orelse)
                if _is_none_test(node.test) and test_names & TOL_NAMES:
                    found.append(f"{where}: atol/rtol defaulted on None")
                elif any(_literal(b) for b in branches) and (test_names | _names(node.body) | _names(node.orelse)) & TOL_NAMES:
                    found.append(f"{where}: a tolerance or a literal default picked by a conditional")
    return found


def test_the_default_is_taken_in_one_place() -> None:
    assert defaults_outside_the_one_function(ROOT) == []


def test_the_scan_sees_each_old_way(tmp_path: Path) -> None:
    """The four the issue names, as they stood: each is found."""
    (tmp_path / "aoti_guard").mkdir()
    (tmp_path / "runtime_probe").mkdir()
    (tmp_path / "zoo").mkdir()
    (tmp_path / "aoti_guard" / "old.py").write_text(
        "from aoti_guard.builder.validate.golden import BUILD_TOLERANCE, RTOL_FLOOR\n"
        "def stages(dtype, atol, rtol):\n"
        "    b_atol, b_rtol = BUILD_TOLERANCE.get(dtype, (0.0, 0.0))\n"
        "    return b_atol if atol is None else atol\n"
        "def compare(self, b_atol):\n"
        "    return self.atol if self.atol is not None else b_atol\n"
        "def run(spec):\n"
        "    return RTOL_FLOOR.get(spec.dtype, 0.0)\n"
    )
    (tmp_path / "zoo" / "judge.py").write_text("def whole(tol):\n    return (tol.atol, tol.rtol) if tol is not None else (0.0, 0.0)\n")
    found = defaults_outside_the_one_function(tmp_path)
    assert sum("outside tolerance.py" in f for f in found) == 2, found  # the import and the .get
    assert sum("defaulted on None" in f for f in found) == 2, found
    assert sum("outside golden.stored_floor" in f for f in found) == 2, found
    assert [f for f in found if f.startswith("zoo/")] == ["zoo/judge.py:2: a tolerance or a literal default picked by a conditional"]
