"""Issue 25, defect 1: strides over derived sizes are checked (every guard rule is evaluated, or the
call is refused).

On main, ``guard/rules._stride_rule`` returned when a stride named a symbol that only a derived size
(``8*s``, ``16*h16``) gives, since ``Env.finish`` bound it later: a channels_last image model
accepted a plain NCHW image (off by up to 2.84) and a model exported from a transposed example
accepted a contiguous input. The property test runs sizes x layouts x dtypes through real packages
(built once per session, ``--no-debug-twin``): every call is refused with InputContractError, or
its result equals the exported program's (``ep.module()``) on the same input.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from runtime_probe import load
from runtime_probe.guard.load import GuardedModel
from runtime_probe.reporting.errors import InputContractError

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Derived:
    """A built package, its guarded model, and the exported program as the oracle."""

    name: str
    model: GuardedModel
    reference: Callable[..., Any]
    shape: Callable[[int, int], tuple[int, ...]]  # the input's shape for two drawn sizes
    tolerance: float


# name -> (the input's shape from two drawn sizes, tolerance against eager)
_SHAPES: dict[str, tuple[Callable[[int, int], tuple[int, ...]], float]] = {
    "plain_k": (lambda a, b: (a, 8), 2e-2),  # k, float16
    "transposed_8k": (lambda a, b: (a, 4), 1e-9),  # 8*s, float64, strides (1, 8*s)
    "transposed_s1": (lambda a, b: (a, 4), 1e-9),  # s + 1, float64, strides (1, s + 1)
    "channels_last_16hw": (lambda a, b: (2, 3, a, b), 1e-4),  # 16*h16 x 16*w16, channels_last
    "channels_last_square": (lambda a, b: (1, 3, a, a), 1e-4),  # 16*h16 x 16*h16: strides 768*h16**2
}


def _factory(name: str) -> Any:
    sys.path.insert(0, str(HERE))
    try:
        import guard_models
    finally:
        sys.path.pop(0)
    return guard_models, getattr(guard_models, name)


@pytest.fixture(scope="session")
def derived(guard_pkg: Callable[[str], Path]) -> dict[str, Derived]:
    out = {}
    for name, (shape, tol) in _SHAPES.items():
        module, make = _factory(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = module.exported(make())
        out[name] = Derived(name, load(guard_pkg(name)), ep.module(), shape, tol)
    return out


def _refused(fn: Callable[[], Any]) -> InputContractError:
    with pytest.raises(InputContractError) as info:
        fn()
    return info.value


# -- the two cases of the issue -------------------------------------------------------------------


def test_a_plain_nchw_image_is_refused_by_a_channels_last_package(derived: dict[str, Derived]) -> None:
    import torch

    d = derived["channels_last_16hw"]
    img = torch.rand(2, 3, 32, 48)
    plain = d.model.compiled(img)  # what the guard let through on main
    assert (plain - d.reference(img)).abs().max().item() > 0.5  # silently wrong without the check
    err = _refused(lambda: d.model(img))
    assert (err.code, err.argument) == ("input.stride", "img")
    assert err.expected == "(4608, 1, 144, 3)" and err.found == "(4608, 1536, 48, 1)"
    assert err.hint is not None and "img.contiguous(memory_format=torch.channels_last)" in err.hint
    good = img.contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(d.model(good), d.reference(good), rtol=1e-4, atol=1e-4)


def test_a_contiguous_input_is_refused_by_a_package_exported_transposed(derived: dict[str, Derived]) -> None:
    import torch

    d = derived["transposed_8k"]
    x = torch.randn(16, 4, dtype=torch.float64)
    assert (d.model.compiled(x) - d.reference(x)).abs().max().item() > 1.0
    err = _refused(lambda: d.model(x))
    assert (err.code, err.argument, err.expected, err.found) == ("input.stride", "x", "(1, 16)", "(4, 1)")
    good = x.t().contiguous().t()
    assert d.model(good).equal(d.reference(good))
    # s = 3 from the size 24, then the strides (1, 24): bound before the stride rule runs
    other = torch.randn(4, 24, dtype=torch.float64).t()
    assert d.model(other).equal(d.reference(other))
    assert _refused(lambda: d.model(torch.randn(4, 20, dtype=torch.float64).t())).code == "input.range"  # 20 is no 8*s


# -- the property ---------------------------------------------------------------------------------

_LAYOUTS = ["contiguous", "channels_last", "transposed", "padded", "expanded", "offset"]
_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64"]


def _make(shape: tuple[int, ...], layout: str, dtype: str) -> Any:
    import torch

    dt = getattr(torch, dtype)

    def fresh(*size: int) -> Any:
        return (torch.rand(*size, dtype=torch.float64) * 4 - 2).to(dt)

    if layout == "contiguous":
        return fresh(*shape)
    if layout == "channels_last":
        assume(len(shape) == 4)
        return fresh(*shape).contiguous(memory_format=torch.channels_last)
    if layout == "transposed":  # every dim reversed in memory
        order = list(range(len(shape)))[::-1]
        return fresh(*[shape[i] for i in order]).permute(*order)
    if layout == "padded":  # rows longer than the last dim
        return fresh(*shape[:-1], shape[-1] + 3)[..., : shape[-1]]
    if layout == "expanded":  # one row repeated: stride 0
        return fresh(1, *shape[1:]).expand(*shape)
    numel = 1
    for n in shape:
        numel *= n
    return fresh(numel + 5)[5:].view(*shape)  # offset: contiguous, 5 elements into its storage


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(list(_SHAPES)),
    a=st.integers(1, 72),
    b=st.integers(1, 72),
    layout=st.sampled_from(_LAYOUTS),
    dtype=st.sampled_from(_DTYPES),
    exact_sizes=st.booleans(),
)
def test_every_call_is_refused_or_equals_the_exported_program(
    derived: dict[str, Derived], name: str, a: int, b: int, layout: str, dtype: str, exact_sizes: bool
) -> None:
    """Sizes: half the examples are sizes the contract can take (multiples of 16 for the images, of 8
    for 8*s), the rest anything in 1..72; dtypes: the package's own or another."""
    import torch

    d = derived[name]
    if exact_sizes:
        step = 16 if name.startswith("channels_last") else 8 if name == "transposed_8k" else 1
        a, b = max(step, a - a % step), max(step, b - b % step)
    if dtype != "int64" and exact_sizes:
        dtype = str(d.model.manifest.io.inputs[0].tensor.dtype)  # type: ignore[union-attr]
    x = _make(d.shape(a, b), layout, dtype)
    try:
        out = d.model(x)
    except InputContractError:
        return
    ref = d.reference(x)
    assert out.dtype == ref.dtype and out.shape == ref.shape, (name, layout, dtype, tuple(x.shape), x.stride())
    torch.testing.assert_close(out, ref, rtol=d.tolerance, atol=d.tolerance, msg=lambda m: f"{name} {layout} {dtype} {x.stride()}: {m}")
