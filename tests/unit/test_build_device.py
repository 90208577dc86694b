"""The build's device is the factory's (issue 43): read off the model and the example, never a
default that puts the golden samples on another device than the compiled graph. CPU and ``meta``
tensors stand in for CUDA here (the rule is the same for every device type); the CUDA factory
itself ran on the lent GPU (docs/gpu-validation.md)."""

from __future__ import annotations

import pytest
import torch

from aoti_guard.builder.resolve.device import AUTO, Placed, cpu_inputs_beside, decide, resolve_device, tensor_devices
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
    where = {t.where: t.of_model for t in tensor_devices(_spec("cpu", "cpu", "cpu"))}
    assert where == {"model.lin.weight": True, "model.lin.bias": True, "model.scale": True, "args[0]": False, "mask": False}


def test_a_factory_mixing_devices_is_refused_naming_the_tensors() -> None:
    with pytest.raises(UsageError) as refused:
        resolve_device(_spec("cpu", "meta", "cpu"), AUTO)
    # a CPU model cannot take an input on another device: named, with the model's device
    assert refused.value.args[0] == "the model is on cpu but inputs are elsewhere (meta: args[0])"
    assert "--device" in (refused.value.hint or "")


def test_a_device_aoti_cannot_compile_for_is_refused() -> None:
    with pytest.raises(UsageError, match="does not compile packages for"):
        resolve_device(_spec("meta", "meta", "meta"), AUTO)


def test_an_explicit_device_moves_everything_there_never_half() -> None:
    # the model and the mask on cpu, x elsewhere: the named device takes all of them (meta stands in
    # for cuda; before, --device cpu moved nothing and left a CUDA factory's model where it was)
    choice = resolve_device(_spec("cpu", "meta", "cpu"), "meta")
    assert (choice.device, choice.origin) == ("meta", "--device")
    assert {t.device for t in tensor_devices(choice.spec)} == {"meta"}


def test_samples_survive_a_move() -> None:
    spec = BuildSpec(TwoLayers(), (torch.randn(2, 4),), {"mask": torch.ones(2, 4)}, samples=("mine.safetensors",))
    assert resolve_device(spec, "cpu").spec.samples == ("mine.safetensors",)


def test_cuda_on_a_host_without_it_is_a_usage_error() -> None:
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA: the refusal is for hosts without it")
    with pytest.raises(UsageError, match="no usable CUDA device"):
        resolve_device(_spec("cpu", "cpu", "cpu"), "cuda")


def _p(where: str, device: str, of_model: bool = False) -> Placed:
    return Placed(where, device, of_model)


W, IDS, H = _p("model.emb", "cuda:0", True), _p("ids", "cpu"), _p("h", "cuda")


@pytest.mark.parametrize(
    ("tensors", "device"),
    [
        ((), None),  # nothing to read: the caller's default
        ((_p("model.w", "cpu", True), _p("x", "cpu")), "cpu"),
        ((W, H), "cuda:0"),  # "cuda" is cuda:0
        ((W, IDS, H), "cuda:0"),  # a CUDA model's CPU ids: AOTI serves it (Run 28), kept per leaf
        ((W, IDS), "cuda:0"),
        ((IDS, H), "cuda:0"),  # no parameters: the inputs' accelerator
        ((IDS,), "cpu"),
    ],
)
def test_placements_aoti_serves_are_accepted(tensors: tuple[Placed, ...], device: str | None) -> None:
    assert decide(tensors) == device


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        (
            (W, _p("model.head", "cpu", True), IDS),
            "the model's parameters and buffers are on 2 devices (cuda:0: model.emb; cpu: model.head)",
        ),
        ((W, IDS, _p("y", "cuda:1")), "the model is on cuda:0 but inputs are elsewhere (cuda:1: y)"),
        ((_p("model.w", "cpu", True), H), "the model is on cpu but inputs are elsewhere (cuda:0: h)"),
        ((H, _p("y", "cuda:1"), IDS), "the example's inputs are on 3 devices (cuda:0: h; cuda:1: y; cpu: ids)"),
    ],
)
def test_placements_aoti_cannot_serve_are_refused_naming_the_tensors(tensors: tuple[Placed, ...], message: str) -> None:
    with pytest.raises(UsageError) as refused:
        decide(tensors)
    assert refused.value.args[0] == message


class Embed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.emb(ids.to(h.device)) + h


def _cpu_ids() -> BuildSpec:
    # meta stands in for cuda: the model and h on it, ids on the CPU on purpose
    with torch.device("meta"):
        return BuildSpec(Embed(), (torch.zeros(3, dtype=torch.int64, device="cpu"), torch.randn(3, 4)))


def test_a_factory_keeping_inputs_on_the_cpu_is_taken_as_it_is() -> None:
    spec = _cpu_ids()
    assert decide(tensor_devices(spec)) == "meta"
    assert resolve_device(spec, "meta").spec.args[0].device.type == "meta"  # --device: everything moves


def test_an_eager_failure_beside_cpu_inputs_names_them_in_the_hint() -> None:
    hint = cpu_inputs_beside(_cpu_ids())
    assert hint is not None and hint.startswith("the example keeps args[0] on the CPU beside the model on meta")
    assert cpu_inputs_beside(_spec("cpu", "cpu", "cpu")) is None
