"""Export guards (issue 24): the condition grammar, the translation of torch's guard text into the
contract's symbols, the build's judgement on real exports, and the guarded loader's enforcement
(both paths) on a contract that carries guards."""

from __future__ import annotations

import ast
import copy
import json
from typing import Any

import pytest
import torch
from torch.export import Dim

from aoti_guard.builder.export import contract as contract_mod
from aoti_guard.builder.export.guards import Untranslatable, read_guards, translate
from aoti_guard.builder.golden import coverage, make_samples, satisfy_guards
from aoti_guard.builder.resolve.binding import bind
from runtime_probe.formats import symexpr
from runtime_probe.guard.inputs import InputChecker
from runtime_probe.package.manifest import Manifest, ShapeGuard, dump_manifest, parse_manifest
from runtime_probe.reporting.errors import InputContractError

from .test_manifest import minimal

# -- the condition grammar (runtime_probe/formats/symexpr.py) -------------------------------------


@pytest.mark.parametrize(
    ("expr", "env", "want"),
    [
        ("h * w == 64", {"h": 8, "w": 8}, True),
        ("h * w == 64", {"h": 4, "w": 4}, False),
        ("h*w != 64", {"h": 4, "w": 4}, True),
        ("s < 2 * t", {"s": 3, "t": 2}, True),
        ("s <= 4", {"s": 5}, False),
        ("s > 4 and s >= 5", {"s": 5}, True),
        ("2 <= s <= 8", {"s": 9}, False),  # chained, as in Python
        ("2 <= s <= 8", {"s": 8}, True),
        ("not s % 8 == 0", {"s": 12}, True),
        ("s // 8 != 1 or s == 8", {"s": 8}, True),
        ("1 + (W//16)*(H//16) == 197", {"W": 224, "H": 224}, True),
        ("1 + (W//16)*(H//16) == 197", {"W": 32, "H": 32}, False),
        ("Max(a, b) == 3 and Min(a, b) == 1", {"a": 1, "b": 3}, True),
        ("True", {}, True),
        ("not False and -s < 0", {"s": 1}, True),
    ],
)
def test_conditions_evaluate_like_python(expr: str, env: dict[str, int], want: bool) -> None:
    assert symexpr.compile_condition(expr)(env) is want


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os').system('true') == 0",
        "h.__class__ == 1",
        "(lambda: 1)() == 1",
        "h ** 99999 == 1",
        "[h for h in range(10**9)] == []",
        "'a' == 'a'",
        "f'{h}' == '1'",
        "h if h else 0",
        "(h := 1) == 1",
        "x[0] == 1",
        "Max(a=1) == 1",
        "open('/etc/passwd') == 1",
        "h == 1; import os",
        "True + 1 == 2",  # a bool is not a size
        "h",  # a size, not a condition
        "not " * 60 + "h == 1",  # nested too deeply
        "-" * 100 + "h == 1",  # arithmetic nested too deeply
        "h == " + "1 + " * 1000 + "1",  # too long
        "",
    ],
)
def test_hostile_conditions_are_refused_without_running_them(expr: str) -> None:
    with pytest.raises(symexpr.ExprError):
        symexpr.compile_condition(expr)({"h": 1, "a": 1, "x": 1})


def test_a_size_expression_stays_arithmetic() -> None:
    with pytest.raises(symexpr.ExprError):
        symexpr.compile_expr("batch == 2")
    assert symexpr.compile_expr("2*batch")({"batch": 3}) == 6


def test_a_division_by_zero_or_a_missing_symbol_is_an_expr_error_at_run_time() -> None:
    cond = symexpr.compile_condition("h // w == 1")
    with pytest.raises(symexpr.ExprError):
        cond({"h": 1, "w": 0})
    with pytest.raises(symexpr.ExprError):
        cond({"h": 1})
    with pytest.raises(symexpr.ExprError):
        symexpr.compile_condition(3)  # type: ignore[arg-type]


# -- translating torch's guard text ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "refs"),
    [
        ("(L['x'].size()[1]*L['x'].size()[2]) == 64", ["x.shape[1]", "x.shape[2]"]),
        ("L['x'].size(0) == L['y'].size()[0]", ["x.shape[0]", "y.shape[0]"]),
        ("L['x'].size()[0] == L['cfg']['a'].size()[1]", ["x.shape[0]", "cfg['a'].shape[1]"]),
        ("L['xs'][1].size()[0] <= 16", ["xs[1].shape[0]"]),
        ("L['x'].stride()[0] != 8", ["x.stride()[0]"]),
        ("max(L['x'].size()[0], 2) == 4", ["x.shape[0]"]),
        ("torch.sym_max(1, L['x'].size()[3] // 16) == 14", ["x.shape[3]"]),  # torch 2.15's form (timm vit_tiny)
        ("torch.sym_min(L['x'].size()[0], L['y'].size()[0]) >= 2", ["x.shape[0]", "y.shape[0]"]),
    ],
)
def test_translation_finds_each_size_a_guard_reads(text: str, refs: list[str]) -> None:
    leaves = ["x", "y", "cfg['a']", "xs[1]"]
    assert [r.text for r in translate(text, leaves).refs] == refs


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("math.floor(L['x'].size()[0] / 3) == 2", "condition grammar"),
        ("L['x'].size()[0] ** 2 == 4", "condition grammar"),
        ("L['z'].size()[0] == 2", "not a tensor input"),
        ("L['x'].storage_offset() == 0", "condition grammar"),
        ("L['n'] == 3", "condition grammar"),
        ("L['x'].size()[L['k']] == 3", "computed index"),
        ("2 == 2", "reads no input size"),
        ("torch.sym_float(L['x'].size()[0]) == 2", "condition grammar"),
        ("numpy.sym_max(1, L['x'].size()[0]) == 2", "condition grammar"),
        ("torch.sym_max(1, L['x'].size()[0], key=2) == 2", "condition grammar"),
        ("L['x'].size()[0] ==", "does not parse"),
    ],
)
def test_a_guard_outside_the_grammar_is_untranslatable(text: str, why: str) -> None:
    with pytest.raises(Untranslatable, match=why):
        translate(text, ["x"])


def test_torchs_symbolic_max_becomes_the_contracts_max() -> None:
    """2.15's ``torch.sym_max`` guard, in the contract's words and evaluated by its grammar."""
    from runtime_probe.formats.symexpr import compile_condition

    t = translate("torch.sym_max(1, L['x'].size()[3] // 16) == 14", ["x"])
    text = ast.unparse(t.render(lambda k, ref: ast.Name(id="w", ctx=ast.Load())))
    assert text == "Max(1, w // 16) == 14"
    cond = compile_condition(text)
    assert cond({"w": 224}) and not cond({"w": 240}) and not cond({"w": 8})


# -- the build's judgement on real exports ---------------------------------------------------------


class _Branch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] * x.shape[2] == 64:
            return x.sin() + 1
        return x.cos() * 2


class _Relation(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y if x.shape[0] == y.shape[0] else x * 2


class _Groups8(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1, 8).sum(-1)


class _Capped(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._check(x.shape[0] <= 20)
        return x * 2


def _judge(model: Any, args: tuple[Any, ...], dynamic: Any, *, accept: bool = False) -> Any:
    ep = torch.export.export(model, args, dynamic_shapes=dynamic)
    binding = bind(model, args, {})
    contract = contract_mod.extract_contract(ep, args, {}, binding, dynamic_shapes=dynamic)
    declared = contract_mod.declared_dim_names(binding, args, {}, dynamic)
    return contract, read_guards(ep, contract, (args, {}), declared=declared, accept=accept)


def test_a_branch_on_two_dynamic_sizes_is_recorded_and_fails_the_build() -> None:
    contract, report = _judge(_Branch(), (torch.randn(2, 8, 8),), {"x": {1: Dim.DYNAMIC, 2: Dim.DYNAMIC}})
    (guard,) = report.guards
    h, w = (s.name for s in contract.symbols)
    assert guard.text == "(L['x'].size()[1]*L['x'].size()[2]) == 64"
    assert symexpr.free_symbols(guard.expr or "") == {h, w}
    assert symexpr.compile_condition(guard.expr or "")({h: 4, w: 16}) and not symexpr.compile_condition(guard.expr or "")({h: 4, w: 4})
    assert guard.words == "x.shape[1]*x.shape[2] must equal 64" and guard.arguments == ("x",)
    (finding,) = report.findings
    assert report.failed and finding.code == "build.export_specialized" and finding.severity.value == "error"
    assert "every (x.shape[1], x.shape[2]) with x.shape[1]*x.shape[2] != 64" in finding.message
    assert "min (" in (finding.found or "") and "--allow-export-guards" in (finding.hint or "")
    assert "torch.cond" in (finding.hint or "") and "torch._check" in (finding.hint or "")


def test_named_dims_give_the_words_and_the_flag_makes_it_a_warning() -> None:
    dynamic = {"x": {1: Dim("h", min=2, max=32), 2: Dim("w", min=2, max=32)}}
    _, report = _judge(_Branch(), (torch.randn(2, 8, 8),), dynamic, accept=True)
    (guard,) = report.guards
    assert (guard.expr, guard.words) == ("h * w == 64", "h*w must equal 64")
    (finding,) = report.findings
    assert finding.severity.value == "warning" and not report.failed
    assert "max (h=32, w=32)" in (finding.found or "")


def test_a_relation_of_dims_declared_apart_is_reported_though_export_unified_them() -> None:
    dynamic = {"x": {0: Dim.DYNAMIC}, "y": {0: Dim.DYNAMIC}}
    contract, report = _judge(_Relation(), (torch.randn(3, 2), torch.randn(3, 2)), dynamic)
    assert len(contract.symbols) == 1  # export unified them
    (guard,) = report.guards
    assert guard.words == "x.shape[0] must equal y.shape[0]" and guard.arguments == ("x", "y")
    (finding,) = report.findings
    assert report.failed and "relates" in finding.message and "one Dim for x.shape[0] and y.shape[0]" in (finding.hint or "")


def test_guards_the_declaration_already_says_are_not_recorded() -> None:
    batch = Dim("batch", min=2, max=32)  # one Dim for both: the relation is declared
    _, shared = _judge(_Relation(), (torch.randn(3, 2), torch.randn(3, 2)), {"x": {0: batch}, "y": {0: batch}})
    assert shared.guards == () and shared.findings == [] and shared.detail["guards_implied_by_ranges"]
    for maximum in (8, None):  # a derived size: guards that all follow from 8*s (8 of them from
        # torch 2.13's export, 7 from 2.15's: how many is torch's business; that none is recorded is ours)
        s = Dim("s", min=1, max=maximum) if maximum else Dim("s", min=1)
        _, derived = _judge(_Groups8(), (torch.randn(2, 32),), {"x": {1: 8 * s}})
        implied = derived.detail["guards_implied_by_ranges"]
        assert derived.guards == () and len(implied) >= 5 and all("L['x'].size()[1]" in g for g in implied), implied
    _, capped = _judge(_Capped(), (torch.randn(4, 3),), {"x": {0: Dim.DYNAMIC}})  # the range says it
    assert capped.guards == () and capped.detail["guards_implied_by_ranges"] == ["L['x'].size()[0] <= 20"]


def test_a_guard_that_cannot_be_translated_is_an_error_even_when_guards_are_accepted() -> None:
    model, args = _Branch(), (torch.randn(2, 8, 8),)
    dynamic = {"x": {1: Dim.DYNAMIC, 2: Dim.DYNAMIC}}
    ep = torch.export.export(model, args, dynamic_shapes=dynamic)
    ep._guards_code = ["math.floor(L['x'].size()[1] / 3) == 2"]  # what a float size guard prints as
    binding = bind(model, args, {})
    contract = contract_mod.extract_contract(ep, args, {}, binding, dynamic_shapes=dynamic)
    report = read_guards(ep, contract, (args, {}), declared=contract_mod.declared_dim_names(binding, args, {}, dynamic), accept=True)
    (guard,) = report.guards
    assert guard.expr is None and guard.text == "math.floor(L['x'].size()[1] / 3) == 2"
    (finding,) = report.findings
    assert report.failed and finding.code == "build.export_specialized" and "cannot translate" in finding.message


def test_a_saved_program_is_judged_by_its_own_symbols(tmp_path: Any) -> None:
    """A saved ExportedProgram keeps its guards (torch's serializer stores them); the user's Dims
    are gone, so a relation export unified is taken as declared and a branch is still reported."""
    for model, args, dynamic, recorded in [
        (_Branch(), (torch.randn(2, 8, 8),), {"x": {1: Dim.DYNAMIC, 2: Dim.DYNAMIC}}, 1),
        (_Relation(), (torch.randn(3, 2), torch.randn(3, 2)), {"x": {0: Dim.DYNAMIC}, "y": {0: Dim.DYNAMIC}}, 0),
    ]:
        path = tmp_path / f"{type(model).__name__}.pt2"
        torch.export.save(torch.export.export(model, args, dynamic_shapes=dynamic), str(path))
        ep = torch.export.load(str(path))
        in_args, in_kwargs = ep.example_inputs
        contract = contract_mod.extract_contract(ep, in_args, in_kwargs, bind(ep, in_args, in_kwargs))
        report = read_guards(ep, contract, (in_args, in_kwargs), declared=None, accept=False)
        assert len(report.guards) == recorded and report.failed is bool(recorded)


# -- enforcement in the guarded loader ------------------------------------------------------------


def _guarded_manifest(guards: list[dict[str, Any]]) -> Manifest:
    m = copy.deepcopy(minimal())
    m["schema_version"] = "1.4"
    h, w = {"expr": "h", "min": 1, "max": 64}, {"expr": "w", "min": 1, "max": 64}
    m["io"]["inputs"][0]["tensor"].update(shape=[2, h, w], stride=["h*w", "w", 1])
    m["io"]["symbols"] = [{"name": "h", "min": 1, "max": 64, "sources": ["x.shape[1]"]}, {"name": "w", "min": 1, "max": 64}]
    m["io"]["guards"] = guards
    return parse_manifest(json.dumps(m).encode())


_HW = {
    "text": "(L['x'].size()[1]*L['x'].size()[2]) == 64",
    "expr": "h * w == 64",
    "words": "h*w must equal 64",
    "arguments": ["x"],
    "dims": ["x.shape[1]", "x.shape[2]"],
}


@pytest.mark.parametrize("fast", [True, False])
def test_a_call_that_breaks_a_guard_is_refused_by_name_on_either_path(fast: bool) -> None:
    checker = InputChecker(_guarded_manifest([_HW]), torch.device("cpu"), no_fast_path=not fast)
    assert (checker.fast is not None) is fast
    for shape in [(2, 8, 8), (2, 4, 16), (2, 16, 4), (2, 1, 64)]:
        x = torch.randn(*shape)
        assert checker.check(x)[0][0] is x
        if fast:
            assert checker.fast(x) is not None  # type: ignore[misc]
    with pytest.raises(InputContractError) as info:
        checker.check(torch.randn(2, 4, 4))
    err = info.value
    assert (err.code, err.argument) == ("input.guard", "x")
    assert str(err).startswith("x: h*w must equal 64, found h=4 (x.shape[1]), w=4 (x.shape[2]) (h*w = 16)")
    assert "exported for that branch only" in str(err) and "torch.cond" in (err.hint or "")
    if fast:
        assert checker.fast(torch.randn(2, 4, 4)) is None  # type: ignore[misc]


def test_guards_the_fast_path_cannot_write_as_python_call_the_compiled_condition() -> None:
    g = {**_HW, "expr": "Max(h, w) == 8", "words": "Max(h, w) must equal 8"}
    checker = InputChecker(_guarded_manifest([g]), torch.device("cpu"))
    assert checker.fast is not None
    assert checker.fast(torch.randn(2, 3, 8)) is not None and checker.fast(torch.randn(2, 3, 9)) is None
    with pytest.raises(InputContractError, match="Max"):
        checker.check(torch.randn(2, 3, 9))


def test_a_guard_that_cannot_be_evaluated_refuses_every_call() -> None:
    g = {**_HW, "expr": None, "words": "x must hold"}
    checker = InputChecker(_guarded_manifest([g]), torch.device("cpu"))
    assert checker.fast is None
    with pytest.raises(InputContractError, match="cannot be checked") as info:
        checker.check(torch.randn(2, 8, 8))
    assert info.value.code == "input.guard"


def test_the_manifest_round_trips_guards_and_omits_the_key_without_them() -> None:
    m = _guarded_manifest([_HW])
    assert m.io.guards == (ShapeGuard(**{**_HW, "arguments": ("x",), "dims": ("x.shape[1]", "x.shape[2]")}),)  # type: ignore[arg-type]
    assert parse_manifest(dump_manifest(m)) == m
    assert "guards" not in json.loads(dump_manifest(parse_manifest(json.dumps(minimal()).encode())))["io"]


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("__import__('os').system('true') == 0", "not a condition over sizes"),
        ("h * w", "not a condition over sizes"),
        ("h * z == 64", "which the contract has no symbol for"),
        (None, "without an expression the loader can check"),
    ],
)
def test_the_manifest_rules_refuse_a_guard_the_loader_could_not_evaluate(expr: str | None, problem: str, tmp_path: Any) -> None:
    import zipfile

    from runtime_probe.package.archive import open_archive
    from runtime_probe.package.manifest_rules import check_manifest

    m = _guarded_manifest([{**_HW, "expr": expr}])
    path = tmp_path / "p.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("model/data/aotinductor/model/a.so", b"x")
    archive, _ = open_archive(path)
    assert archive is not None
    with archive:
        messages = [f.message for f in check_manifest(m, archive)]
    assert any(problem in msg for msg in messages), messages


# -- golden samples -------------------------------------------------------------------------------


def test_a_sample_is_moved_to_the_nearest_sizes_that_satisfy_the_guards() -> None:
    cond = [(ShapeGuard("t", "h * w == 64", "h*w must equal 64"), symexpr.compile_condition("h * w == 64"))]
    bounds = {"h": (2, 32), "w": (2, 32)}
    assert satisfy_guards({"h": 2, "w": 2}, cond, bounds) == {"h": 8, "w": 8}
    assert satisfy_guards({"h": 32, "w": 32}, cond, bounds) in ({"h": 2, "w": 32}, {"h": 32, "w": 2})
    assert satisfy_guards({"h": 8, "w": 8}, cond, bounds) == {"h": 8, "w": 8}
    never = [(cond[0][0], symexpr.compile_condition("h * w == 7919"))]  # a prime beyond the bounds' products
    assert satisfy_guards({"h": 2, "w": 2}, never, bounds, budget=500) is None


def test_make_samples_satisfies_accepted_guards_and_says_so() -> None:
    m = _guarded_manifest([_HW])
    plain, _ = make_samples(m.io, [torch.randn(2, 8, 8)])
    assert any(s.symbols["h"] * s.symbols["w"] != 64 for s in plain)  # without the guards: the declared ranges
    samples, notes = make_samples(m.io, [torch.randn(2, 8, 8)], guards=m.io.guards or ())
    assert notes == [] and len(samples) >= 2
    for s in samples:
        assert s.symbols["h"] * s.symbols["w"] == 64 and tuple(s.leaves[0].shape) == (2, s.symbols["h"], s.symbols["w"])
    assert all("nearest sizes that satisfy the export guard(s) h*w must equal 64" in s.note for s in samples if s.id != "example")
    _, gaps = coverage(m.io, samples)
    assert gaps
    table, exempt = coverage(m.io, samples, guards_accepted=True)
    assert exempt == [] and table["h"]["restricted_by"] == ["h*w must equal 64"]


class _PaddedTo8(torch.nn.Module):
    """The guard a transformers decoder with a cache gets on CUDA (GPU zoo, llama_cache at full
    size): ``seq*max(1, 8 + past + seq - (past + seq) % 8) > 1``, true at every declared size."""

    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n = x.shape[0] + y.shape[0]
        width = max(1, 8 + n - n % 8)
        if x.shape[0] * width > self.threshold:
            return x.sum() + torch.zeros(width).sum() + y.sum()
        return x.sum()


def test_a_guard_over_max_and_mod_on_wide_ranges_is_proven_by_its_bounds() -> None:
    """512 x 512 sizes are too many to try one by one and sympy cannot simplify Max over Mod: the
    build refused llama_cache on the H100 with build.export_specialized for a guard every size
    satisfies. The bounds decide it (the Mod is 0..7, so the width is at least 3)."""
    dynamic = {"x": {0: Dim("seq", min=1, max=512)}, "y": {0: Dim("past", min=1, max=512)}}
    args = (torch.randn(5), torch.randn(7))
    _, implied = _judge(_PaddedTo8(1), args, dynamic)
    assert implied.guards == () and not implied.failed and len(implied.detail["guards_implied_by_ranges"]) == 1
    _, real = _judge(_PaddedTo8(20), args, dynamic)  # seq=1, past=1: 1*8 > 20 is false: a real guard
    (guard,) = real.guards
    assert real.failed and "% 8" in guard.text


def test_interval_bounds_prove_only_what_holds() -> None:
    import sympy

    from aoti_guard.builder.export.guard_bounds import holds_on_ranges

    seq, past, w = sympy.symbols("seq past w", integer=True)
    padded = seq * sympy.Max(1, 8 + past + seq - sympy.Mod(past + seq, 8))
    assert holds_on_ranges(sympy.Gt(padded, 1), {seq: (1, 256), past: (1, 256)})
    assert not holds_on_ranges(sympy.Gt(padded, 8), {seq: (1, 256), past: (1, 256)})  # seq=1, past=1 gives 8
    assert holds_on_ranges(sympy.Le(seq, 256), {seq: (1, 256)}) and not holds_on_ranges(sympy.Le(seq, 255), {seq: (1, 256)})
    assert not holds_on_ranges(sympy.Le(seq, 10**9), {seq: (1, None)})  # no upper bound: never proven
    assert holds_on_ranges(sympy.Ge(sympy.floor(w / 16), 1), {w: (16, 512)})
    assert not holds_on_ranges(sympy.Ge(sympy.floor(w / 16), 1), {w: (15, 512)})
    assert not holds_on_ranges(sympy.Eq(sympy.Mod(seq, past), 0), {seq: (1, 9), past: (1, 9)})  # a symbolic modulus: unknown
