"""Where each output must come back (issue 43): one rule (package/placement.py ``output_devices``)
read by the guarded loader after every native call (guard/outputs.py, ``output.device``) and by the
probe's golden phase on the child's reply (``golden.output_device``). A second device is played by
"meta" (a device with no data): the checks compare devices only, so a CUDA model's output left on
the wrong device is the same case as a CPU package's output on meta."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from runtime_probe.package.manifest import Manifest, parse_manifest
from runtime_probe.package.placement import on_device, output_devices
from runtime_probe.reporting.errors import OutputContractError
from tests.unit.test_manifest import minimal

torch = pytest.importorskip("torch")


def _out(name: str, device: str) -> dict[str, Any]:
    return {"name": name, "tensor": {"dtype": "float32", "shape": [2], "stride": [1], "contiguous": True, "device": device}}


def _manifest(package: str = "cpu", outputs: tuple[str, ...] = ("cpu", "cpu")) -> Manifest:
    raw = copy.deepcopy(minimal())
    raw["target"]["device_type"] = package
    raw["io"]["inputs"][0]["tensor"]["device"] = package
    raw["io"]["outputs"] = [_out(f"output[{i}]", d) for i, d in enumerate(outputs)] + [{"name": "output[9]", "tensor": None, "value": 3}]
    return parse_manifest(json.dumps(raw).encode())


def test_each_tensor_output_comes_back_on_the_package_device_or_its_own() -> None:
    # a CUDA model returning its logits on the GPU and one tensor on the CPU (a CPU embedding's lookup)
    m = _manifest("cuda", ("cuda", "cpu"))
    assert output_devices(m, "cuda:1") == {"output[0]": "cuda:1", "output[1]": "cpu"}  # the constant output has none
    assert output_devices(m, "cuda") == {"output[0]": "cuda", "output[1]": "cpu"}


@pytest.mark.parametrize(
    ("found", "expected", "same"),
    [("cuda:0", "cuda:0", True), ("cuda:0", "cuda", True), ("cuda:1", "cuda:0", False), ("cpu", "cuda:0", False), ("meta", "cpu", False)],
)
def test_a_device_without_an_index_accepts_any_index_of_its_type(found: str, expected: str, same: bool) -> None:
    assert on_device(found, expected) is same


class _Compiled:
    """torch's compiled model without a loader: the guarded model calls it as torch's own call."""

    def __init__(self, outputs: tuple[Any, ...]) -> None:
        self.outputs = outputs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.outputs


class _Runner(_Compiled):
    """torch's loader as far as the guarded model's direct path (check -> boxed_run) reaches it."""

    def __init__(self, outputs: tuple[Any, ...]) -> None:
        super().__init__(outputs)
        self.loader = self

    def get_call_spec(self) -> tuple[str, str]:
        from torch.utils import _pytree as pytree

        in_spec = pytree.tree_flatten(((0,), {}))[1]
        out_spec = pytree.tree_flatten(tuple(range(len(self.outputs))))[1]
        return pytree.treespec_dumps(in_spec), pytree.treespec_dumps(out_spec)

    def boxed_run(self, flat: list[Any]) -> list[Any]:
        return list(self.outputs)


@pytest.mark.parametrize("compiled", [_Compiled, _Runner], ids=["torch_call", "direct"])
def test_the_guard_refuses_an_output_on_another_device_by_name(compiled: Any) -> None:
    from runtime_probe.guard.load import GuardedModel

    model = GuardedModel(compiled((torch.zeros(2), torch.zeros(2, device="meta"))), _manifest(), "cpu")
    assert (model._direct is not None) == (compiled is _Runner)  # each of the two call paths is the one tested
    with pytest.raises(OutputContractError) as exc:
        model(torch.randn(3, 16))
    assert (exc.value.code, exc.value.output, exc.value.expected, exc.value.found) == ("output.device", "output[1]", "cpu", "meta")
    assert "output 'output[1]' came back on meta; the package records cpu" in str(exc.value)
    assert exc.value.exit_code == 1


@pytest.mark.parametrize("compiled", [_Compiled, _Runner], ids=["torch_call", "direct"])
def test_the_guard_returns_outputs_where_the_manifest_records_them(compiled: Any) -> None:
    from runtime_probe.guard.load import GuardedModel

    # the package records output[1] on meta (its "other device"): the CPU package returns it there on purpose
    outputs = (torch.zeros(2), torch.zeros(2, device="meta"))
    model = GuardedModel(compiled(outputs), _manifest(outputs=("cpu", "meta")), "cpu")
    assert tuple(model(torch.randn(3, 16))) == outputs


def test_the_child_reports_each_outputs_device() -> None:
    from runtime_probe.child import ops

    req = ops.RunRequest("g", {}, [], "", ["output[0]"], "cpu")
    assert ops._judged_output(req, "output[0]", torch.zeros(2), {})["device"] == "cpu"


def test_the_probe_judges_an_output_returned_on_another_device() -> None:
    from runtime_probe.probe.golden_phase import _judge

    devices = output_devices(_manifest("cuda", ("cuda", "cpu")), "cuda:0")
    ok = {"passed": True, "nonfinite": 0}
    reply = {"outputs": {"output[0]": {**ok, "device": "cuda:0"}, "output[1]": {**ok, "device": "cuda:0"}}}
    (finding,) = _judge("s3", reply, devices)
    assert (finding.code, finding.severity.value, finding.expected, finding.found) == ("golden.output_device", "error", "cpu", "cuda:0")
    assert finding.evidence == {"sample": "s3", "output": "output[1]"}
    assert "sample s3: output 'output[1]' came back on cuda:0; the package records cpu" in finding.message
    reply["outputs"]["output[1]"]["device"] = "cpu"
    assert _judge("s3", reply, devices) == []
