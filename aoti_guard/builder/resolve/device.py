"""The build's device: the factory's own, or ``--device`` with everything moved there.

A GPU user's factory returns the model and its example on ``cuda``; a build that then compiled for
CUDA but made its golden samples on the CPU blamed the user's example for the tool's own mistake
(issue 43). So without ``--device`` the device is read off the model's parameters and buffers and
the example's tensors; with it, ALL of them move there (never half: the model on one device and
the example on another). A factory that mixes devices is a usage error naming the tensors, since
AOTInductor compiles a graph for one device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from aoti_guard.spec import BuildSpec
from runtime_probe.reporting.errors import UsageError

__all__ = ["AUTO", "COMPILABLE", "DeviceChoice", "resolve_device", "tensor_devices"]

COMPILABLE = ("cpu", "cuda")  # the device types AOTInductor compiles packages for
_NAMED = 3  # tensors named per device in a mixed-device error


@dataclasses.dataclass(frozen=True)
class DeviceChoice:
    device: str  # "cpu" or "cuda:N"
    origin: str  # "--device" | "the factory's tensors" | "no tensors (cpu)"
    spec: BuildSpec  # everything on ``device``


def tensor_devices(spec: BuildSpec) -> Iterator[tuple[str, str]]:
    """(where, device) for every tensor the build will use: the model's parameters and buffers
    (a saved program's state), the example's positional and keyword tensors."""
    import torch
    from torch.utils import _pytree as pytree

    model = spec.model
    if isinstance(model, torch.export.ExportedProgram):
        for name, t in model.state_dict.items():
            if isinstance(t, torch.Tensor):
                yield f"the program's {name}", str(t.device)
        args, kwargs = model.example_inputs or ((), {})
        if not spec.args and not spec.kwargs:
            spec = dataclasses.replace(spec, args=tuple(args), kwargs=dict(kwargs))
    elif isinstance(model, torch.nn.Module):
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            yield f"model.{name}", str(t.device)
    for i, arg in enumerate(spec.args):
        for path, leaf in pytree.tree_flatten_with_path(arg)[0]:
            if isinstance(leaf, torch.Tensor):
                yield f"args[{i}]{pytree.keystr(path)}", str(leaf.device)
    for key, value in spec.kwargs.items():
        for path, leaf in pytree.tree_flatten_with_path(value)[0]:
            if isinstance(leaf, torch.Tensor):
                yield f"{key}{pytree.keystr(path)}", str(leaf.device)


def _normalise(device: str) -> str:
    return "cuda:0" if device == "cuda" else device


AUTO = "auto"  # --device's default: the factory's tensors' device


def resolve_device(spec: BuildSpec, requested: str) -> DeviceChoice:
    """The device the build exports, compiles and validates on, and the spec with every tensor
    there. ``requested`` is ``--device`` (``auto``: the factory's).

    Raises:
        UsageError: the factory mixes devices (without ``--device``), uses a device type
            AOTInductor does not compile for, or ``--device`` names a CUDA device this host lacks.
    """
    import torch

    if requested != AUTO:
        device = _normalise(requested)
        if isinstance(spec.model, torch.export.ExportedProgram):
            elsewhere = sorted({d for _, d in tensor_devices(spec) if _normalise(d) != device})
            if elsewhere:  # a program's graph holds its device: moving its state alone would be half a move
                raise UsageError(
                    f"--device {requested} but the saved program was exported on {', '.join(elsewhere)}",
                    hint="leave --device out (the program's own device is used), or export it again on that device",
                )
            _check_available(device)
            return DeviceChoice(device, "--device", spec)
        return DeviceChoice(device, "--device", _moved(spec, device))
    by_device: dict[str, list[str]] = {}
    for where, device in tensor_devices(spec):
        by_device.setdefault(_normalise(device), []).append(where)
    if not by_device:
        return DeviceChoice("cpu", "no tensors (cpu)", spec)
    if len(by_device) > 1:
        listed = "; ".join(f"{dev}: {', '.join(names[:_NAMED])}{' ...' if len(names) > _NAMED else ''}" for dev, names in by_device.items())
        raise UsageError(
            f"the factory's model and example are on {len(by_device)} devices ({listed})",
            hint="AOTInductor compiles one graph for one device: put the model and its example on one device "
            "(model.to(dev), x.to(dev)), or pass --device cpu|cuda[:N] to move all of them there",
        )
    (device,) = by_device
    if device.split(":", 1)[0] not in COMPILABLE:
        raise UsageError(
            f"the factory's tensors are on {device!r}, a device AOTInductor does not compile packages for",
            hint="return the model and example on cpu or cuda, or pass --device cpu|cuda[:N]",
        )
    _check_available(device)
    return DeviceChoice(device, "the factory's tensors", spec)


def _check_available(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        index = int(device.split(":", 1)[1])
        if not torch.cuda.is_available():
            raise UsageError(
                f"the build needs {device} but this host has no usable CUDA device", hint="build on a GPU host, or use --device cpu"
            )
        if index >= torch.cuda.device_count():
            raise UsageError(
                f"the build needs {device} but this host has {torch.cuda.device_count()} CUDA device(s)",
                hint="choose an index below the device count, e.g. --device cuda:0",
            )


def _moved(spec: BuildSpec, device: str) -> BuildSpec:
    """``spec`` with the model and every example tensor on ``device`` (samples stay: they are
    checked and moved where they are used)."""
    import torch
    from torch.utils import _pytree as pytree

    _check_available(device)
    move = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    model = spec.model.to(device) if isinstance(spec.model, torch.nn.Module) else spec.model
    return dataclasses.replace(
        spec, model=model, args=tuple(pytree.tree_map(move, list(spec.args))), kwargs=pytree.tree_map(move, dict(spec.kwargs))
    )
