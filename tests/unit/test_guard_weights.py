"""The guarded loader's weights (runtime_probe.guard.weights, GuardedModel.load_constants) without a
compiled model: what torch's load_constants would copy wrong is refused before it is called, and a
package without weights refuses every call until they are loaded. Issue 42."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from runtime_probe.package.manifest import Manifest, parse_manifest
from runtime_probe.reporting.errors import ConstantsContractError
from tests.unit.test_manifest import minimal

torch = pytest.importorskip("torch")

CONSTANTS = [
    {"fqn": "embed.weight", "kind": "parameter", "dtype": "float32", "shape": [8, 4], "sha256": "0" * 64, "nbytes": 128}
    | {"storage": "inlined", "in_state_dict": True, "tied_with": ["head.weight"]},
    {"fqn": "head.weight", "kind": "parameter", "dtype": "float32", "shape": [8, 4], "sha256": "0" * 64, "nbytes": 128}
    | {"storage": "package", "in_state_dict": True, "tied_with": ["embed.weight"]},
    {"fqn": "head.bias", "kind": "parameter", "dtype": "float32", "shape": [8], "sha256": "0" * 64, "nbytes": 32}
    | {"storage": "package", "in_state_dict": True},
    {"fqn": "table", "kind": "buffer", "dtype": "float32", "shape": [4], "sha256": "0" * 64, "nbytes": 16}
    | {"storage": "package", "in_state_dict": False},
]


def _manifest(*, weightless: bool = False) -> Manifest:
    configs = {"aot_inductor.package_constants_in_so": "False"} if weightless else {}
    data = {**minimal(), "schema_version": "1.7", "constants": CONSTANTS, "inductor_configs": configs}
    return parse_manifest(json.dumps(data).encode())


class _Compiled:
    """torch's compiled model as far as the guarded loader's weights touch it."""

    def __init__(self) -> None:
        self.loaded: list[dict[str, Any]] = []
        self.calls = 0

    def load_constants(self, constants: dict[str, Any], *, check_full_update: bool) -> None:
        self.loaded.append(dict(constants))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return args[0]


def _guarded(weightless: bool = False) -> Any:
    from runtime_probe.guard.load import GuardedModel
    from runtime_probe.guard.weights import UnsetConstants

    manifest = _manifest(weightless=weightless)
    return GuardedModel(_Compiled(), manifest, "cpu", unset=UnsetConstants.for_package(manifest))


def _state_dict() -> dict[str, Any]:
    embed = torch.randn(8, 4)
    return {"embed.weight": embed, "head.weight": embed, "head.bias": torch.randn(8)}  # tied: one tensor, two names


def test_a_state_dict_with_tied_weights_loads_as_it_is() -> None:
    model = _guarded()
    sd = _state_dict()
    model.load_constants(sd)
    (loaded,) = model.compiled.loaded
    assert set(loaded) == {"head.weight", "head.bias"}  # table keeps the package's value
    assert loaded["head.weight"] is sd["embed.weight"]


def test_a_save_pretrained_map_fills_the_tied_weight_from_its_other_name() -> None:
    model = _guarded()
    sd = _state_dict()
    del sd["head.weight"]
    model.load_constants(sd)
    assert model.compiled.loaded[0]["head.weight"] is sd["embed.weight"]


@pytest.mark.parametrize(
    ("edit", "code", "name", "words"),
    [
        # a contiguous slice of a larger tensor: torch copies the whole storage from the view's start
        (lambda sd: sd.__setitem__("head.bias", torch.randn(24)[8:16]), "constants.layout", "head.bias", "larger storage"),
        (lambda sd: sd.__setitem__("head.bias", torch.randn(24)[:8]), "constants.layout", "head.bias", "larger storage"),
        (lambda sd: sd.__setitem__("head.bias", torch.randn(9)), "constants.shape_mismatch", "head.bias", "shape [9]"),
        (lambda sd: sd.__setitem__("head.bias", torch.randn(8, dtype=torch.bfloat16)), "constants.dtype_mismatch", "head.bias", "bfloat16"),
        (
            lambda sd: sd.update({"embed.weight": torch.randn(4, 8).t(), "head.weight": None}),
            "constants.layout",
            "embed.weight",
            "contiguous",
        ),
        (lambda sd: sd.__setitem__("head.weight", sd["head.weight"] + 1), "constants.tied_mismatch", "head.weight", "tied"),
        (lambda sd: sd.__setitem__("head.extra", torch.randn(2)), "constants.unexpected", "head.extra", "not a constant"),
        (lambda sd: sd.pop("head.bias"), "constants.missing", "head.bias", "no tensor"),
    ],
)
def test_what_torch_would_copy_wrong_is_refused_before_it_is_called(edit: Any, code: str, name: str, words: str) -> None:
    model = _guarded()
    sd = _state_dict()
    edit(sd)
    sd = {k: v for k, v in sd.items() if v is not None}
    with pytest.raises(ConstantsContractError) as info:
        model.load_constants(sd)
    assert (info.value.code, info.value.constant) == (code, name) and words in str(info.value)
    assert model.compiled.loaded == []


def test_a_package_without_weights_refuses_every_call_until_they_are_loaded() -> None:
    model = _guarded(weightless=True)
    twin = copy.deepcopy(model)  # shares the native model, so it shares what is set
    x = torch.randn(2, 16)
    with pytest.raises(ConstantsContractError) as info:
        model(x)
    assert info.value.code == "constants.missing" and "never set: head.bias, head.weight, table" in str(info.value)
    model.load_constants({"head.bias": torch.randn(8)}, check_full_update=False)
    with pytest.raises(ConstantsContractError, match=r"never set: head\.weight, table"):
        twin(x)
    # the package has no value for 'table' (no kept entry): a state_dict() alone is refused by name
    with pytest.raises(ConstantsContractError) as info:
        model.load_constants(_state_dict())
    assert (info.value.code, info.value.constant) == ("constants.missing", "table") and "non-persistent buffer" in str(info.value)
    model.load_constants({**_state_dict(), "table": torch.zeros(4)})
    assert torch.equal(twin(x), x) and twin.compiled.calls == 1


def test_a_package_with_weights_is_callable_at_once() -> None:
    model = _guarded()
    x = torch.randn(2, 16)
    assert torch.equal(model(x), x)
