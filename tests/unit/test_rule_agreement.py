"""Both paths of every input rule agree (guard/rules.py: ``RULES`` and ``CALL_RULES``, each rule's
diagnosing check and fast form written side by side).

For every rule of the table, a contract that has it, calls that keep it and calls that break it:
a call that keeps it is accepted by the generated fast path AND the diagnosing path; a call that
breaks it makes the fast path say "look closer" (None, or it raises) and the diagnosing path
raise one of the rule's codes. A rule added to the table without a case here fails
``test_every_rule_has_cases``; one whose fast form does not express it fails the call tests.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from runtime_probe.guard.fastpath import compile_fast
from runtime_probe.guard.inputs import InputChecker
from runtime_probe.guard.rules import CALL_RULES, RULES
from runtime_probe.package.manifest import (
    DataCheck,
    Dim,
    InputSpec,
    IOContract,
    Manifest,
    ParamSpec,
    ShapeGuard,
    Symbol,
    TensorSpec,
    parse_manifest,
)
from runtime_probe.reporting.errors import InputContractError

from .test_manifest import minimal

Call = Callable[[], tuple[Any, ...]]


@dataclass(frozen=True)
class Case:
    rule: str
    inputs: tuple[InputSpec, ...]
    symbols: tuple[Symbol, ...]
    good: tuple[Call, ...]
    bad: tuple[Call, ...]
    guards: tuple[ShapeGuard, ...] | None = None
    data_checks: tuple[DataCheck, ...] | None = None


def _t(name: str, dtype: str, shape: tuple[int | Dim, ...], stride: tuple[int | str, ...], *, contiguous: bool = True) -> InputSpec:
    return InputSpec(name, name, "tensor", None, TensorSpec(dtype, shape, stride, contiguous, "cpu"))


B = Dim("b", 2, 64)
X = _t("x", "float32", (B, 16), (16, 1))
SYMS = (Symbol("b", 2, 64, ("x.shape[0]",)),)


def _resized(t: torch.Tensor, nbytes: int) -> torch.Tensor:
    t.untyped_storage().resize_(nbytes)
    return t


def _twin(t: torch.Tensor) -> Any:
    from torch.testing._internal.two_tensor import TwoTensor

    return TwoTensor(t, t)


CASES = (
    Case(
        "constant",
        (X, InputSpec("n", "n", "constant", None, None, 3)),
        SYMS,
        good=(lambda: (torch.randn(4, 16), 3),),
        bad=(lambda: (torch.randn(4, 16), 4), lambda: (torch.randn(4, 16), torch.tensor(3))),
    ),
    Case(
        "what",
        (X, _t("z", "complex64", (4,), (1,))),
        SYMS,
        good=(lambda: (torch.randn(4, 16), torch.randn(4, dtype=torch.complex64)),),
        bad=(
            lambda: ([[0.0] * 16] * 4, torch.randn(4, dtype=torch.complex64)),  # type
            lambda: (_twin(torch.randn(4, 16)), torch.randn(4, dtype=torch.complex64)),  # subclass
            lambda: (torch.randn(4, 16).to_sparse(), torch.randn(4, dtype=torch.complex64)),  # layout
            lambda: (torch.randn(4, 16, dtype=torch.float64), torch.randn(4, dtype=torch.complex64)),  # dtype
            lambda: (torch.randn(4, 16, device="meta"), torch.randn(4, dtype=torch.complex64)),  # device
            lambda: (torch.randn(4, 16)._neg_view(), torch.randn(4, dtype=torch.complex64)),  # negative bit
            lambda: (torch.randn(4, 16), torch.randn(4, dtype=torch.complex64).conj()),  # conjugate bit
        ),
    ),
    Case(
        "storage",
        (X,),
        SYMS,
        good=(lambda: (torch.randn(4, 16),),),
        bad=(lambda: (_resized(torch.randn(4, 16), 16),), lambda: (torch._efficientzerotensor((4, 16)),)),
    ),
    Case(
        "static",
        (X,),
        SYMS,
        good=(lambda: (torch.randn(2, 16),),),
        bad=(lambda: (torch.randn(4, 15),), lambda: (torch.randn(4, 16, 1),)),
    ),
    Case(
        "symbolic",
        (X, _t("y", "float32", (B,), (1,))),
        SYMS,
        good=(lambda: (torch.randn(64, 16), torch.randn(64)),),
        bad=(
            lambda: (torch.randn(1, 16), torch.randn(1)),  # below the range
            lambda: (torch.randn(65, 16), torch.randn(65)),  # above it
            lambda: (torch.randn(4, 16), torch.randn(5)),  # the shared symbol differs
        ),
    ),
    Case(
        "derived",
        (X, _t("y", "float32", (Dim("2*b", 4, 128), 4), (4, 1))),
        SYMS,
        good=(lambda: (torch.randn(4, 16), torch.randn(8, 4)),),
        bad=(lambda: (torch.randn(4, 16), torch.randn(10, 4)), lambda: (torch.randn(4, 16), torch.randn(200, 4))),
    ),
    Case(
        "strides",
        (X, _t("w", "float32", (4, B), (1, 4), contiguous=False)),
        SYMS,
        good=(lambda: (torch.randn(4, 16), torch.randn(4, 4).t()), lambda: (torch.randn(3, 16), torch.randn(3, 4).t())),
        bad=(lambda: (torch.randn(4, 16), torch.randn(4, 4)), lambda: (torch.randn(4, 16).t().contiguous().t(), torch.randn(4, 4).t())),
    ),
    Case(
        "value",
        (X, _t("k", "int64", (), ())),
        (*SYMS, Symbol("u0", 0, 9, (), value_of="k")),
        good=(lambda: (torch.randn(4, 16), torch.tensor(9)),),
        bad=(lambda: (torch.randn(4, 16), torch.tensor(10)), lambda: (torch.randn(4, 16), torch.tensor(-1))),
    ),
    Case(
        "guards",
        (X,),
        SYMS,
        good=(lambda: (torch.randn(4, 16),),),
        bad=(lambda: (torch.randn(5, 16),),),
        guards=(ShapeGuard("Eq(Mod(s0, 2), 0)", "b % 2 == 0", "b % 2 must equal 0", ("x",), ("x.shape[0]",)),),
    ),
    Case(
        "data_checks",
        (_t("k", "int64", (), ()), X),
        (*SYMS, Symbol("u0", 0, 63, (), value_of="k")),
        good=(lambda: (torch.tensor(3), torch.randn(4, 16)),),
        bad=(lambda: (torch.tensor(4), torch.randn(4, 16)),),
        data_checks=(DataCheck("u0 < s0", "u0 < b", "k's value must be < x.shape[0]", ("k", "x")),),
    ),
)

_CODES = {r.name: r.codes for r in (*RULES, *CALL_RULES)}


def _manifest(case: Case) -> Manifest:
    base = parse_manifest(json.dumps(minimal()).encode())
    params = tuple(ParamSpec(i.name, "positional_or_keyword", "positional") for i in case.inputs)
    inputs = tuple(dataclasses.replace(i, index=k) for k, i in enumerate(case.inputs))
    io = IOContract(params, inputs, (), case.symbols, guards=case.guards, data_checks=case.data_checks)
    return dataclasses.replace(base, io=io)


def test_every_rule_has_cases() -> None:
    table = {r.name for r in (*RULES, *CALL_RULES)}
    covered = {c.rule for c in CASES if c.good and c.bad}
    assert table <= covered, f"rules without agreement cases: {sorted(table - covered)}"


def _ids(kind: str) -> list[Any]:
    return [pytest.param(c, k, id=f"{c.rule}-{kind}{k}") for c in CASES for k in range(len(getattr(c, kind)))]


@pytest.mark.parametrize(("case", "k"), _ids("good"))
def test_a_call_that_keeps_the_rule_is_accepted_by_both_paths(case: Case, k: int) -> None:
    manifest = _manifest(case)
    fast = compile_fast(manifest, torch.device("cpu"), torch)
    assert fast is not None, f"rule {case.rule}: no fast form for its contract"
    args = case.good[k]()
    assert fast(*args) is not None, f"rule {case.rule}: the fast path looks closer at a call that keeps it"
    InputChecker(manifest, torch.device("cpu"), no_fast_path=True).check(*args)


@pytest.mark.parametrize(("case", "k"), _ids("bad"))
def test_a_call_that_breaks_the_rule_is_refused_by_both_paths(case: Case, k: int) -> None:
    manifest = _manifest(case)
    fast = compile_fast(manifest, torch.device("cpu"), torch)
    assert fast is not None, f"rule {case.rule}: no fast form for its contract"
    args = case.bad[k]()
    try:
        said = fast(*args)
    except Exception:  # noqa: BLE001 - raising also sends the call to the diagnosing path
        said = None
    assert said is None, f"rule {case.rule}: the fast path accepted a call the rule refuses"
    with pytest.raises(InputContractError) as info:
        InputChecker(manifest, torch.device("cpu"), no_fast_path=True).check(*args)
    assert info.value.code in _CODES[case.rule], (case.rule, info.value.code, str(info.value))
