"""Issue 16 in the guarded loader: hostile tensors are refused before native code runs, never
a segfault, a bare RuntimeError or a silently wrong result; the API gaps (deepcopy) are closed."""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from runtime_probe import load
from runtime_probe.guard.load import GuardedModel
from runtime_probe.reporting.errors import InputContractError
from tests.hostile.corpus_calls import PACKAGES, CallOutcome, run_calls

from .conftest import Built

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def call_outcomes(static_pkg: Built, embed_pkg: Built, guard_pkg: Callable[[str], Path]) -> list[CallOutcome]:
    packages = {"static": static_pkg.path, "embed": embed_pkg.path}
    return run_calls({**packages, **{name: guard_pkg(name) for name in PACKAGES if name not in packages}})


def test_every_hostile_call_is_refused_or_right(call_outcomes: list[CallOutcome]) -> None:
    """The corpus of calls (tests/hostile/corpus_calls.py), run in a child: on main, FakeTensor,
    TwoTensor and the lying subclass reached native code, sparse CSR/mkldnn/nested raised bare
    RuntimeErrors, a TwoTensor weight segfaulted in load_constants and deepcopy raised TypeError.
    Issue 25: a zero tensor, a resized or shrunk storage and the functorch wrappers reached native
    code (raw errors, or a read past the storage), an id past the table aborted the process, and
    strides over a derived size were never checked."""
    bad = [f"{o.case.name}: {o.result} {o.code} {o.detail}" for o in call_outcomes if not o.ok]
    assert not bad, bad
    assert not [o for o in call_outcomes if o.result == "crashed"]


@pytest.fixture(scope="module")
def mixed(mixed_pkg: Built) -> GuardedModel:
    return load(mixed_pkg.path)


def _mixed_inputs() -> tuple[Any, Any, Any]:
    import torch

    torch.manual_seed(0)
    return torch.randn(4, 8), torch.randint(0, 10, (4,)), torch.rand(8, dtype=torch.float16) + 0.5


def test_negative_bit_is_wrong_in_plain_aoti_and_refused_by_the_guard(mixed: GuardedModel) -> None:
    x, ids, scale = _mixed_inputs()
    negated = x.clone()._neg_view()
    plain = mixed.compiled(negated, ids, scale=scale)[0]
    # plain AOTI reads the raw memory: it computes with x, not with -x
    assert not bool((plain == mixed.compiled(-x, ids, scale=scale)[0]).all())
    with pytest.raises(InputContractError) as info:
        mixed(negated, ids, scale=scale)
    assert (info.value.code, info.value.argument, info.value.hint) == ("input.flags", "x", "pass x.resolve_neg()")
    assert mixed(negated.resolve_neg(), ids, scale=scale)[0].equal(mixed.compiled(-x, ids, scale=scale)[0])


def test_deepcopy_works_like_plain_aoti(mixed: GuardedModel) -> None:
    x, ids, scale = _mixed_inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        twin = copy.deepcopy(mixed)
    assert twin is not mixed and twin.checker is not mixed.checker
    assert twin(x, ids, scale=scale)[0].equal(mixed(x, ids, scale=scale)[0])
    with pytest.raises(InputContractError):
        twin(x.double(), ids, scale=scale)


def _with_value_range(model: GuardedModel, name: str, value_range: tuple[int, int]) -> Any:
    io = model.manifest.io
    inputs = tuple(
        dataclasses.replace(i, tensor=dataclasses.replace(i.tensor, value_range=value_range)) if i.name == name and i.tensor else i
        for i in io.inputs
    )
    return dataclasses.replace(model.manifest, io=dataclasses.replace(io, inputs=inputs))


def test_check_values_names_the_id_and_its_index(mixed: GuardedModel) -> None:
    """Issue 13 item 4: the manifest's value_range (recorded by the build) checked on request."""
    x, ids, scale = _mixed_inputs()
    manifest = _with_value_range(mixed, "ids", (0, 9))  # Embedding(10, 8)
    checked = GuardedModel(mixed.compiled, manifest, "cpu", check_values=True)
    unchecked = GuardedModel(mixed.compiled, manifest, "cpu", check_values=False)
    assert checked(x, ids, scale=scale)[1].equal(ids * 2)
    bad = ids.clone()
    bad[2] = 1_000_000_000
    with pytest.raises(InputContractError) as info:
        checked(x, bad, scale=scale)
    assert (info.value.code, info.value.argument) == ("input.value_range", "ids")
    assert str(info.value).startswith("ids holds 1000000000 at [2]; the table has 10 rows")
    with pytest.raises(InputContractError, match=r"ids holds -1 at \[0\]"):
        checked(x, torch_full_like(ids, -1), scale=scale)
    unchecked.check(x, bad, scale=scale)  # the opt-out: no value is read
    with pytest.raises(InputContractError, match="ids holds 1000000000"):
        GuardedModel(mixed.compiled, manifest, "cpu")(x, bad, scale=scale)  # on CPU, checked by default


def torch_full_like(t: Any, value: int) -> Any:
    import torch

    return torch.full_like(t, value)


# -- the property of issue 16: refused, or exactly plain AOTI's answer on a plain contiguous copy --

_DTYPES = ["float32", "float64", "float16", "int64", "complex64"]
_LAYOUTS = ["strided", "sparse_coo", "sparse_csr", "mkldnn", "nested"]
_STRIDES = ["contiguous", "transposed", "sliced", "offset", "expanded"]
_SUBCLASSES = ["none", "parameter", "python", "two_tensor"]
_FLAGS = ["none", "neg", "conj"]


def _make(dtype: str, layout: str, stride: str, subclass: str, flag: str) -> Any:
    import torch
    from torch.testing._internal.two_tensor import TwoTensor

    dt = getattr(torch, dtype)
    base = (torch.randn(6, 16, dtype=torch.float64) * 3).to(dt)
    x = {
        "contiguous": lambda: base[:4, :8].contiguous(),
        "transposed": lambda: base[:8, :4].contiguous().t(),
        "sliced": lambda: base[:4, ::2],
        "offset": lambda: base.reshape(-1)[8:40].view(4, 8),
        "expanded": lambda: base[:1, :8].expand(4, 8),
    }[stride]()
    if flag == "neg":
        x = x._neg_view()
    elif flag == "conj":
        x = x.conj()  # a no-op on a real dtype
    if layout == "sparse_coo":
        x = x.to_sparse()
    elif layout == "sparse_csr":
        x = x.to_sparse_csr()
    elif layout == "mkldnn":
        x = x.to_mkldnn()
    elif layout == "nested":
        x = torch.nested.nested_tensor([x[:2], x[2:]])
    if subclass == "parameter":
        x = torch.nn.Parameter(x, requires_grad=False)
    elif subclass == "python":
        x = x.as_subclass(type("Sub", (torch.Tensor,), {}))
    elif subclass == "two_tensor":
        x = TwoTensor(x, x)
    return x


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    dtype=st.sampled_from(_DTYPES),
    layout=st.sampled_from(_LAYOUTS),
    stride=st.sampled_from(_STRIDES),
    subclass=st.sampled_from(_SUBCLASSES),
    flag=st.sampled_from(_FLAGS),
)
def test_guard_refuses_or_equals_plain_aoti_on_a_contiguous_copy(
    mixed: GuardedModel, dtype: str, layout: str, stride: str, subclass: str, flag: str
) -> None:
    import torch

    _, ids, scale = _mixed_inputs()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = _make(dtype, layout, stride, subclass, flag)
    except (RuntimeError, TypeError, ValueError, NotImplementedError, AssertionError):
        assume(False)  # torch cannot make this combination: nothing to hand the guard
    try:
        out = mixed(x, ids, scale=scale)
    except InputContractError:
        return
    plain = x.detach().resolve_conj().resolve_neg().contiguous().as_subclass(torch.Tensor)
    ref = mixed.compiled(plain, ids, scale=scale)
    assert all(a.equal(b) for a, b in zip(out, ref)), (dtype, layout, stride, subclass, flag)
