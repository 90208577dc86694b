"""The build's device is the factory's (issue 43): read off the model and the example, never a
default that puts the golden samples on another device than the compiled graph. CPU and ``meta``
tensors stand in for CUDA here (the rule is the same for every device type); the CUDA factory
itself ran on the lent GPU (docs/gpu-validation.md)."""

from __future__ import annotations

import pytest
import torch

from aoti_guard.builder.resolve.device import AUTO, resolve_device, tensor_devices
from aoti_guard.spec import BuildSpec
from runtime_probe.reporting.errors import UsageError


class TwoLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale * mask


def _spec(model_device: str, x_device: str, mask_device: str) -> BuildSpec:
    return BuildSpec(TwoLayers().to(model_device), (torch.randn(2, 4, device=x_device),), {"mask": torch.ones(2, 4, device=mask_device)})


def test_a_factory_on_one_device_builds_there_and_nothing_moves() -> None:
    spec = _spec("cpu", "cpu", "cpu")
    choice = resolve_device(spec, AUTO)
    assert (choice.device, choice.origin) == ("cpu", "the factory's tensors")
    assert choice.spec is spec


def test_every_tensor_the_build_uses_is_seen() -> None:
    where = dict(tensor_devices(_spec("cpu", "cpu", "cpu")))
    assert set(where) == {"model.lin.weight", "model.lin.bias", "model.scale", "args[0]", "mask"}


def test_a_factory_mixing_devices_is_refused_naming_the_tensors() -> None:
    with pytest.raises(UsageError) as refused:
        resolve_device(_spec("cpu", "meta", "cpu"), AUTO)
    assert "2 devices" in str(refused.value) and "meta: args[0]" in str(refused.value)
    assert "cpu: model.lin.weight" in str(refused.value) and "--device" in (refused.value.hint or "")


def test_a_device_aoti_cannot_compile_for_is_refused() -> None:
    with pytest.raises(UsageError, match="does not compile packages for"):
        resolve_device(_spec("meta", "meta", "meta"), AUTO)


def test_an_explicit_device_moves_everything_there_never_half() -> None:
    # the model and the mask on cpu, x elsewhere: the named device takes all of them (meta stands in
    # for cuda; before, --device cpu moved nothing and left a CUDA factory's model where it was)
    choice = resolve_device(_spec("cpu", "meta", "cpu"), "meta")
    assert (choice.device, choice.origin) == ("meta", "--device")
    assert {d for _, d in tensor_devices(choice.spec)} == {"meta"}


def test_samples_survive_a_move() -> None:
    spec = BuildSpec(TwoLayers(), (torch.randn(2, 4),), {"mask": torch.ones(2, 4)}, samples=("mine.safetensors",))
    assert resolve_device(spec, "cpu").spec.samples == ("mine.safetensors",)


def test_cuda_on_a_host_without_it_is_a_usage_error() -> None:
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA: the refusal is for hosts without it")
    with pytest.raises(UsageError, match="no usable CUDA device"):
        resolve_device(_spec("cpu", "cpu", "cpu"), "cuda")
