"""The guarded loader's input checks without a package: every contract rule raises its code and
argument, and the generated fast path (guard/fastpath.py) never accepts what the diagnosing path
refuses, so every error is the same whichever path a call takes (issue 14)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from runtime_probe.guard.inputs import InputChecker
from runtime_probe.package.manifest import Manifest, parse_manifest
from runtime_probe.reporting.errors import InputContractError

from .test_manifest import minimal


def _tensor(dtype: str, shape: list[Any], stride: list[Any], value_range: list[int] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"dtype": dtype, "shape": shape, "stride": stride, "contiguous": True, "device": "cpu"}
    if value_range is not None:
        spec["value_range"] = value_range
    return spec


def _manifest() -> Manifest:
    """x [batch, 16], y [batch, seq] (a shared symbol), z complex64 [4], ids int64 [batch] by keyword
    with a value range, n a constant 3."""
    m = copy.deepcopy(minimal())
    batch = {"expr": "batch", "min": 2, "max": 64}
    m["io"]["params"] = [{"name": n, "kind": "positional_or_keyword", "passed": "positional"} for n in ("x", "y", "z", "n")] + [
        {"name": "ids", "kind": "keyword_only", "passed": "keyword"}
    ]
    m["io"]["inputs"] = [
        {"name": "x", "param": "x", "kind": "tensor", "index": 0, "tensor": _tensor("float32", [batch, 16], [16, 1])},
        {
            "name": "y",
            "param": "y",
            "kind": "tensor",
            "index": 1,
            "tensor": _tensor("float32", [batch, {"expr": "seq", "min": 1, "max": 8}], ["seq", 1]),
        },
        {"name": "z", "param": "z", "kind": "tensor", "index": 2, "tensor": _tensor("complex64", [4], [1])},
        {"name": "n", "param": "n", "kind": "constant", "value": 3},
        {"name": "ids", "param": "ids", "kind": "tensor", "index": 3, "tensor": _tensor("int64", [batch], [1], [0, 9])},
    ]
    m["io"]["symbols"] = [{"name": "batch", "min": 2, "max": 64, "sources": ["x.shape[0]"]}, {"name": "seq", "min": 1, "max": 8}]
    import json

    return parse_manifest(json.dumps(m).encode())


def _good(batch: int = 4) -> dict[str, Any]:
    return {
        "x": torch.randn(batch, 16),
        "y": torch.randn(batch, 3),
        "z": torch.randn(4, dtype=torch.complex64),
        "n": 3,
        "ids": torch.arange(batch) % 10,
    }


def _call(**change: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    v = {**_good(), **change}
    return (v["x"], v["y"], v["z"], v["n"]), {"ids": v["ids"]}


def _two(t: torch.Tensor) -> Any:
    from torch.testing._internal.two_tensor import TwoTensor

    return TwoTensor(t, t)


def _fake() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return torch.randn(4, 16)


def _resized(t: torch.Tensor, nbytes: int) -> torch.Tensor:
    """``t`` after its storage was resized to ``nbytes`` (a view taken before keeps its sizes)."""
    t.untyped_storage().resize_(nbytes)
    return t


def _shrunk() -> torch.Tensor:
    """Rows 2..5 of a [6, 16] tensor whose storage then shrank to 64 floats."""
    base = torch.randn(6, 16)
    view = base[2:6]
    base.untyped_storage().resize_(64 * 4)
    return view


x4 = torch.randn(4, 16)
CASES: dict[str, tuple[Callable[[], tuple[tuple[Any, ...], dict[str, Any]]], str, str | None]] = {
    "not a tensor": (lambda: _call(x=[[0.0] * 16] * 4), "input.type", "x"),
    "fake tensor": (lambda: _call(x=_fake()), "input.subclass", "x"),
    "two tensor": (lambda: _call(x=_two(x4.clone())), "input.subclass", "x"),
    "python subclass": (lambda: _call(x=x4.as_subclass(type("Sub", (torch.Tensor,), {}))), "input.subclass", "x"),
    "sparse coo": (lambda: _call(x=x4.to_sparse()), "input.layout", "x"),
    "sparse csr": (lambda: _call(x=x4.to_sparse_csr()), "input.layout", "x"),
    "mkldnn": (lambda: _call(x=x4.to_mkldnn()), "input.layout", "x"),
    "nested": (lambda: _call(x=torch.nested.nested_tensor([x4[:2], x4[2:]])), "input.layout", "x"),
    "dtype": (lambda: _call(x=x4.double()), "input.dtype", "x"),
    "device": (lambda: _call(x=torch.empty(4, 16, device="meta")), "input.device", "x"),
    "negative bit": (lambda: _call(x=x4.clone()._neg_view()), "input.flags", "x"),
    "conjugate bit": (lambda: _call(z=torch.randn(4, dtype=torch.complex64).conj()), "input.flags", "z"),
    "rank": (lambda: _call(x=torch.randn(4, 16, 1)), "input.shape", "x"),
    "static size": (lambda: _call(x=torch.randn(4, 17)), "input.shape", "x"),
    "below min": (lambda: _call(x=torch.randn(1, 16), y=torch.randn(1, 3), ids=torch.zeros(1, dtype=torch.int64)), "input.range", "x"),
    "above max": (lambda: _call(x=torch.randn(65, 16), y=torch.randn(65, 3), ids=torch.zeros(65, dtype=torch.int64)), "input.range", "x"),
    "second symbol above max": (lambda: _call(y=torch.randn(4, 9)), "input.range", "y"),
    "shared symbol differs": (lambda: _call(y=torch.randn(5, 3)), "input.range", "y"),
    "shared symbol differs by keyword": (lambda: _call(ids=torch.zeros(5, dtype=torch.int64)), "input.range", "ids"),
    "transposed": (lambda: _call(x=torch.randn(16, 4).t()), "input.stride", "x"),
    "symbolic stride": (lambda: _call(y=torch.randn(3, 4).t()), "input.stride", "y"),
    "zero tensor": (lambda: _call(x=torch._efficientzerotensor((4, 16))), "input.storage", "x"),
    "storage resized to 0": (lambda: _call(x=_resized(torch.randn(4, 16), 0)), "input.storage", "x"),
    "storage shrunk under a view": (lambda: _call(x=_shrunk()), "input.storage", "x"),
    "constant value": (lambda: _call(n=4), "input.value", "n"),
    "constant as tensor": (lambda: _call(n=torch.tensor(3)), "input.type", "n"),
    "missing keyword": (lambda: (_call()[0], {}), "input.count", "ids"),
    "unknown keyword": (lambda: (_call()[0], {**_call()[1], "w": 1}), "input.count", "w"),
    "too many": (lambda: ((*_call()[0], 1), _call()[1]), "input.count", None),
    "positional and keyword": (lambda: (_call()[0], {**_call()[1], "x": x4}), "input.count", "x"),
}


def _raised(fn: Callable[[], Any]) -> InputContractError:
    with pytest.raises(InputContractError) as info:
        fn()
    return info.value


@pytest.fixture(scope="module")
def checkers() -> tuple[InputChecker, InputChecker]:
    manifest = _manifest()
    return InputChecker(manifest, torch.device("cpu")), InputChecker(manifest, torch.device("cpu"), no_fast_path=True)


def test_the_fast_path_is_used_for_this_contract(checkers: tuple[InputChecker, InputChecker]) -> None:
    fast, slow = checkers
    assert fast.fast is not None and slow.fast is None
    args, kwargs = _call()
    assert fast.fast(*args, **kwargs) == (args, kwargs)
    assert fast.check(*args, **kwargs) == slow.check(*args, **kwargs) == (args, kwargs)
    assert fast.check(*args[:2], n=3, z=args[2], **kwargs) == (args, kwargs)  # bound by name: same layout
    param = torch.nn.Parameter(args[0].clone(), requires_grad=False)
    assert fast.fast(param, *args[1:], **kwargs) is None  # not a plain Tensor: the slow path decides...
    assert fast.check(param, *args[1:], **kwargs)[0][0] is param  # ...and accepts a Parameter


@pytest.mark.parametrize("case", list(CASES))
def test_every_rule_raises_the_same_on_the_fast_path(checkers: tuple[InputChecker, InputChecker], case: str) -> None:
    fast, slow = checkers
    make, code, argument = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args, kwargs = make()
    try:
        accepted = fast.fast(*args, **kwargs)  # type: ignore[misc]
    except Exception:  # noqa: BLE001 - binding errors and hostile objects mean "not accepted"
        accepted = None
    assert accepted is None, "the fast path accepted a call the contract refuses"
    on_fast = _raised(lambda: fast.check(*args, **kwargs))
    on_slow = _raised(lambda: slow.check(*args, **kwargs))
    assert (on_fast.code, on_fast.argument) == (code, argument)
    assert (str(on_fast), on_fast.hint, on_fast.expected, on_fast.found) == (str(on_slow), on_slow.hint, on_slow.expected, on_slow.found)


def test_value_range_is_checked_on_request_only() -> None:
    manifest = _manifest()
    args, kwargs = _call(ids=torch.tensor([1, 2, 1000, 3]))
    InputChecker(manifest, torch.device("cpu")).check(*args, **kwargs)  # off by default
    for no_fast_path in (False, True):
        checker = InputChecker(manifest, torch.device("cpu"), check_values=True, no_fast_path=no_fast_path)
        err = _raised(lambda: checker.check(*args, **kwargs))  # noqa: B023 - called at once
        assert (err.code, err.argument, err.found) == ("input.value_range", "ids", "1000 at [2]")
        assert str(err).startswith("ids holds 1000 at [2]; the table has 10 rows")
        checker.check(*_call()[0], **_call()[1])


def test_contracts_the_fast_path_does_not_express_use_the_diagnosing_path() -> None:
    m = copy.deepcopy(minimal())
    m["io"]["inputs"][0]["tensor"]["shape"] = [{"expr": "2*batch", "min": 2, "max": 128}, 16]
    import json

    checker = InputChecker(parse_manifest(json.dumps(m).encode()), torch.device("cpu"))
    assert checker.fast is None
    checker.check(torch.randn(4, 16))
    assert _raised(lambda: checker.check(torch.randn(4, 15))).code == "input.shape"


# --- a nested argument given by its leaf names (a DynamicCache without transformers) -------------


def _cache_manifest() -> Manifest:
    """ids [batch, seq]; cache: a library type flattening to two tensors [batch, 2, past, 4]."""
    import json

    m = copy.deepcopy(minimal())
    batch = {"expr": "batch", "min": 1, "max": 8}
    kv = _tensor("float32", [batch, 2, {"expr": "past", "min": 1, "max": 32}, 4], ["8*past", "4*past", 4, 1])
    m["io"]["params"] = [
        {"name": "ids", "kind": "positional_or_keyword", "passed": "keyword"},
        {"name": "cache", "kind": "positional_or_keyword", "passed": "keyword"},
    ]
    m["io"]["inputs"] = [
        {"name": "ids", "param": "ids", "kind": "tensor", "index": 0, "tensor": _tensor("int64", [batch, 1], [1, 1])},
        {"name": "cache['key_cache'][0]", "param": "cache", "kind": "tensor", "index": 1, "tensor": kv},
        {"name": "cache['value_cache'][0]", "param": "cache", "kind": "tensor", "index": 2, "tensor": kv},
    ]
    m["io"]["symbols"] = [{"name": "batch", "min": 1, "max": 8}, {"name": "past", "min": 1, "max": 32}]
    return parse_manifest(json.dumps(m).encode())


@pytest.mark.parametrize(
    "keys",
    [
        ("cache['key_cache'][0]", "cache['value_cache'][0]"),  # the manifest's names
        ("cache.key_cache.0", "cache.value_cache.0"),  # NamedOutputs' dotted form: outputs fed back
        ("key_cache.0", "value_cache.0"),  # dotted, without the argument's name
    ],
)
def test_a_nested_argument_can_be_given_by_its_leaf_names(keys: tuple[str, str]) -> None:
    from runtime_probe.guard.inputs import LeafInputs

    checker = InputChecker(_cache_manifest(), torch.device("cpu"))
    k, v = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    args, kwargs = checker.check(ids=torch.zeros(2, 1, dtype=torch.int64), cache={keys[1]: v, keys[0]: k})
    assert args == ()
    cache = kwargs["cache"]
    assert isinstance(cache, LeafInputs)
    assert list(cache) == ["cache['key_cache'][0]", "cache['value_cache'][0]"]  # the manifest's order
    assert cache["cache['key_cache'][0]"] is k


def test_leaf_names_are_checked_like_the_structure() -> None:
    checker = InputChecker(_cache_manifest(), torch.device("cpu"))
    ids = torch.zeros(2, 1, dtype=torch.int64)
    with pytest.raises(InputContractError) as exc:  # past 40 > 32
        checker.check(ids=ids, cache={"key_cache.0": torch.randn(2, 2, 40, 4), "value_cache.0": torch.randn(2, 2, 40, 4)})
    assert exc.value.code == "input.range"
    with pytest.raises(InputContractError) as exc:  # a name the manifest does not have: the structure is wrong
        checker.check(ids=ids, cache={"key_cache.0": torch.randn(2, 2, 5, 4), "keys.1": torch.randn(2, 2, 5, 4)})
    assert exc.value.code == "input.count"


class _FlatRunner:
    """torch's loader, reduced to what the guarded loader's flat path calls: the specs name a
    type no process can import, so outputs come back as NamedOutputs."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.loader = self

    def get_call_spec(self) -> tuple[str, str]:
        spec = '[1, {"type": "nowhere.Cache", "context": "null", "children_spec": []}]'
        return spec, spec

    def boxed_run(self, flat: list[Any]) -> list[Any]:
        self.seen = list(flat)
        return [flat[0].float().sum().reshape(1), flat[1] * 2]


def test_the_flat_run_takes_the_leaves_in_the_exports_order_not_forwards() -> None:
    """forward(ids, cache) exported with cache= before ids= (gpt2_cache: forward() takes
    past_key_values before attention_mask, the example passed the mask first): the runner must get
    the leaves in the manifest's input order. Before the fix it got forward()'s order: NaN logits."""
    from runtime_probe.guard.load import GuardedModel, NamedOutputs

    manifest = _cache_manifest()
    reordered = copy.deepcopy(manifest.io)
    object.__setattr__(reordered, "params", tuple(reversed(manifest.io.params)))  # forward(cache, ids)
    object.__setattr__(manifest, "io", reordered)
    runner = _FlatRunner()
    model = GuardedModel(runner, manifest, "cpu")
    ids, k, v = torch.zeros(2, 1, dtype=torch.int64), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    out = model(cache={"key_cache.0": k, "value_cache.0": v}, ids=ids)
    assert runner.seen[0] is ids and runner.seen[1] is k and runner.seen[2] is v
    assert isinstance(out, NamedOutputs)


def _phantom_manifest() -> Manifest:
    """ids and mask [batch, 8*seq8], image [1, 3, 16*h16, 16*h16]: seq8 and h16 only appear
    multiplied, as the zoo's text models on CUDA and timm's vit give them (no input carries them
    plainly)."""
    import json

    m = copy.deepcopy(minimal())
    batch = {"expr": "batch", "min": 1, "max": 8}
    seq = {"expr": "8*seq8", "min": 8, "max": 64}
    side = {"expr": "16*h16", "min": 16, "max": 256}
    m["io"]["params"] = [{"name": n, "kind": "positional_or_keyword", "passed": "positional"} for n in ("ids", "mask", "image")]
    m["io"]["inputs"] = [
        {"name": "ids", "param": "ids", "kind": "tensor", "index": 0, "tensor": _tensor("int64", [batch, seq], ["8*seq8", 1])},
        {"name": "mask", "param": "mask", "kind": "tensor", "index": 1, "tensor": _tensor("int64", [batch, seq], ["8*seq8", 1])},
        {
            "name": "image",
            "param": "image",
            "kind": "tensor",
            "index": 2,
            "tensor": _tensor("float32", [1, 3, side, side], ["768*h16**2", "256*h16**2", "16*h16", 1]),
        },
    ]
    m["io"]["symbols"] = [{"name": "batch", "min": 1, "max": 8}, {"name": "seq8", "min": 1, "max": 8}, {"name": "h16", "min": 1, "max": 16}]
    return parse_manifest(json.dumps(m).encode())


def test_a_size_over_a_symbol_no_input_carries_must_be_one_it_can_take() -> None:
    """Found on timm's vit_tiny (H, W = 16*h16, a real package): a 24-pixel side was inside the
    range [16, 256] and reached native code, and ids and mask of 8*seq8 could differ."""
    checker = InputChecker(_phantom_manifest(), torch.device("cpu"))
    ids, image = torch.zeros(2, 16, dtype=torch.int64), torch.randn(1, 3, 32, 32)
    assert checker.check(ids, ids.clone(), image)[0][0] is ids  # seq8 = 2, h16 = 2
    not_multiple = _raised(lambda: checker.check(torch.zeros(2, 12, dtype=torch.int64), torch.zeros(2, 12, dtype=torch.int64), image))
    assert (not_multiple.code, not_multiple.argument) == ("input.range", "ids") and "never equals" in str(not_multiple)
    odd_side = _raised(lambda: checker.check(ids, ids.clone(), torch.randn(1, 3, 24, 24)))
    assert (odd_side.code, odd_side.argument) == ("input.range", "image")
    disagree = _raised(lambda: checker.check(ids, torch.zeros(2, 24, dtype=torch.int64), image))
    assert (disagree.code, disagree.argument) == ("input.range", "mask") and "'8*seq8' is 16" in str(disagree)


def _derived_manifest(shape: list[Any], stride: list[Any], symbols: list[dict[str, Any]], contiguous: bool = False) -> Manifest:
    import json

    m = copy.deepcopy(minimal())
    m["io"]["params"] = [{"name": "x", "kind": "positional_or_keyword", "passed": "positional"}]
    spec = {**_tensor("float32", shape, stride), "contiguous": contiguous}
    m["io"]["inputs"] = [{"name": "x", "param": "x", "kind": "tensor", "index": 0, "tensor": spec}]
    m["io"]["symbols"] = symbols
    return parse_manifest(json.dumps(m).encode())


def test_strides_over_a_derived_size_are_checked_once_it_is_bound() -> None:
    """Issue 25, defect 1: x [8*s, 4] with strides (1, 8*s). On main the stride rule returned on
    the unbound s, so a contiguous x ran (off by 8.0 in a real package)."""
    manifest = _derived_manifest([{"expr": "8*s", "min": 8, "max": 64}, 4], [1, "8*s"], [{"name": "s", "min": 1, "max": 8}])
    checker = InputChecker(manifest, torch.device("cpu"))
    assert checker.fast is None  # a derived size: the diagnosing path decides
    good = torch.randn(4, 16).t()
    assert checker.check(good)[0][0] is good
    err = _raised(lambda: checker.check(torch.randn(16, 4)))
    assert (err.code, err.argument, err.expected, err.found) == ("input.stride", "x", "(1, 16)", "(4, 1)")


def test_every_symbol_a_size_determines_is_bound_in_as_many_passes_as_it_takes() -> None:
    """x [2*a + b, 8*a]: b is known only once a is (from the second dim); then the strides
    (1, 2*a + b) are checked, not skipped."""
    shape = [{"expr": "2*a + b", "min": 1, "max": 100}, {"expr": "8*a", "min": 8, "max": 64}]
    manifest = _derived_manifest(shape, [1, "2*a + b"], [{"name": "a", "min": 1, "max": 8}, {"name": "b", "min": 0, "max": 9}])
    checker = InputChecker(manifest, torch.device("cpu"))
    good = torch.randn(16, 7).t()  # a = 2, b = 3
    assert checker.check(good)[0][0] is good
    assert _raised(lambda: checker.check(torch.randn(7, 16))).code == "input.stride"


def test_a_rule_no_input_lets_evaluate_refuses_the_call() -> None:
    """x [a + b, 4]: no input determines a and b apart, so the size rule cannot be evaluated: the
    call is refused (input.unchecked), never passed unchecked."""
    shape = [{"expr": "a + b", "min": 2, "max": 20}, 4]
    manifest = _derived_manifest(shape, [1, "a + b"], [{"name": "a", "min": 1, "max": 10}, {"name": "b", "min": 1, "max": 10}])
    err = _raised(lambda: InputChecker(manifest, torch.device("cpu")).check(torch.randn(4, 6).t()))
    assert (err.code, err.argument) == ("input.unchecked", "x")
    assert "no input determines a, b" in str(err)


def test_a_square_channels_last_image_strides_use_a_power() -> None:
    """sympy prints a square image's strides with one symbol as ``768*h16**2``: on main symexpr
    refused ``**`` (the archive checks rejected the package); now the strides are evaluated."""
    side = {"expr": "16*h16", "min": 16, "max": 64}
    manifest = _derived_manifest([1, 3, side, side], ["768*h16**2", 1, "48*h16", 3], [{"name": "h16", "min": 1, "max": 4}])
    checker = InputChecker(manifest, torch.device("cpu"))
    good = torch.rand(1, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    assert checker.check(good)[0][0] is good
    err = _raised(lambda: checker.check(torch.rand(1, 3, 32, 32)))
    assert (err.code, err.expected) == ("input.stride", "(3072, 1, 96, 3)")
    assert err.hint == "the model was compiled for channels_last: pass x.contiguous(memory_format=torch.channels_last)"
