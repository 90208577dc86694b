"""The build's device: the factory's own, or ``--device`` with the model moved there.

A GPU user's factory returns the model and its example on ``cuda``; a build that then compiled for
CUDA but made its golden samples on the CPU blamed the user's example for the tool's own mistake
(issue 43). So without ``--device`` the device is read off the model's parameters and buffers and
the example's tensors (``decide``), by what AOTInductor serves (docs/gpu-validation.md Run 28):

- the model's parameters and buffers on one device: the package's (``cuda:0``). A model split
  across devices is refused naming them: the package is compiled for one device, and a split
  model is nothing AOTInductor was shown to serve.
- an input on the package's device, or on the CPU on purpose (a CUDA model's embedding ids kept
  on the CPU: AOTInductor serves it; recorded per leaf in the manifest, ``TensorSpec.device``, and
  placed and checked per leaf: runtime_probe/package/placement.py).
- an input on another accelerator (``cuda:1`` beside a ``cuda:0`` model), or on CUDA beside a CPU
  model: refused naming the inputs.
- a model without parameters takes the device of its non-CPU inputs (one, or refused), else cpu.

With ``--device`` the model and every example tensor move there (never half: an input kept on the
CPU beside a CUDA model is the factory's choice, made by leaving ``--device`` out).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from aoti_guard.spec import BuildSpec
from runtime_probe.reporting.errors import UsageError

__all__ = ["AUTO", "COMPILABLE", "DeviceChoice", "Placed", "cpu_inputs_beside", "decide", "resolve_device", "tensor_devices"]

COMPILABLE = ("cpu", "cuda")  # the device types AOTInductor compiles packages for
_NAMED = 3  # tensors named per device in a mixed-device error


@dataclasses.dataclass(frozen=True)
class DeviceChoice:
    device: str  # "cpu" or "cuda:N"
    origin: str  # "--device" | "the factory's tensors" | "no tensors (cpu)"
    spec: BuildSpec  # the model on ``device``, each input on it or (the factory's choice) on the CPU


class Placed(NamedTuple):
    """One tensor the build uses: where it is in the factory's return, its device, and whether it
    is the model's (a parameter, buffer or a saved program's state) or an input's."""

    where: str
    device: str
    of_model: bool


def tensor_devices(spec: BuildSpec) -> Iterator[Placed]:
    """Every tensor the build will use: the model's parameters and buffers (a saved program's
    state), the example's positional and keyword tensors."""
    import torch
    from torch.utils import _pytree as pytree

    model = spec.model
    if isinstance(model, torch.export.ExportedProgram):
        for name, t in model.state_dict.items():
            if isinstance(t, torch.Tensor):
                yield Placed(f"the program's {name}", str(t.device), True)
        args, kwargs = model.example_inputs or ((), {})
        if not spec.args and not spec.kwargs:
            spec = dataclasses.replace(spec, args=tuple(args), kwargs=dict(kwargs))
    elif isinstance(model, torch.nn.Module):
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            yield Placed(f"model.{name}", str(t.device), True)
    for i, arg in enumerate(spec.args):
        for path, leaf in pytree.tree_flatten_with_path(arg)[0]:
            if isinstance(leaf, torch.Tensor):
                yield Placed(f"args[{i}]{pytree.keystr(path)}", str(leaf.device), False)
    for key, value in spec.kwargs.items():
        for path, leaf in pytree.tree_flatten_with_path(value)[0]:
            if isinstance(leaf, torch.Tensor):
                yield Placed(f"{key}{pytree.keystr(path)}", str(leaf.device), False)


def _normalise(device: str) -> str:
    return "cuda:0" if device == "cuda" else device


def _listed(by_device: dict[str, list[str]]) -> str:
    return "; ".join(f"{dev}: {', '.join(names[:_NAMED])}{' ...' if len(names) > _NAMED else ''}" for dev, names in by_device.items())


def _group(tensors: Iterable[Placed]) -> dict[str, list[str]]:
    by_device: dict[str, list[str]] = {}
    for t in tensors:
        by_device.setdefault(_normalise(t.device), []).append(t.where)
    return by_device


def decide(tensors: Iterable[Placed]) -> str | None:
    """The package's device for the factory's tensors (module docstring: the table), None when it
    has none. Compares device strings only.

    Raises:
        UsageError: a placement AOTInductor cannot serve, naming the tensors.
    """
    placed = list(tensors)
    model = _group(t for t in placed if t.of_model)
    if len(model) > 1:
        raise UsageError(
            f"the model's parameters and buffers are on {len(model)} devices ({_listed(model)})",
            hint="AOTInductor compiles the model for one device: put all of it there (model.to(dev)), "
            "or pass --device cpu|cuda[:N] to move it",
        )
    inputs = _group(t for t in placed if not t.of_model)
    accelerated = [d for d in inputs if d != "cpu"]
    if model:
        (device,) = model
    elif len(accelerated) > 1:
        raise UsageError(
            f"the example's inputs are on {len(inputs)} devices ({_listed(inputs)})",
            hint="a package runs on one device: put the inputs there (the CPU too is allowed for some of them), "
            "or pass --device cpu|cuda[:N] to move all of them",
        )
    else:
        device = accelerated[0] if accelerated else ("cpu" if inputs else "")
    stray = {d: names for d, names in inputs.items() if d not in (device, "cpu")}
    if stray:
        raise UsageError(
            f"the model is on {device} but inputs are elsewhere ({_listed(stray)})",
            hint=f"move those inputs to {device} (or keep them on the CPU where the model reads them there), "
            "or pass --device cpu|cuda[:N] to move everything",
        )
    return device or None


AUTO = "auto"  # --device's default: the factory's tensors' device


def resolve_device(spec: BuildSpec, requested: str) -> DeviceChoice:
    """The device the build exports, compiles and validates on, and the spec with the model there.
    ``requested`` is ``--device`` (``auto``: the factory's).

    Raises:
        UsageError: the factory mixes devices in a way AOTInductor cannot serve (without
            ``--device``), uses a device type AOTInductor does not compile for, or ``--device``
            names a CUDA device this host lacks.
    """
    import torch

    if requested != AUTO:
        device = _normalise(requested)
        if isinstance(spec.model, torch.export.ExportedProgram):
            _check_program_on(spec, device, requested)
            _check_available(device)
            return DeviceChoice(device, "--device", spec)
        return DeviceChoice(device, "--device", _moved(spec, device))
    found = decide(tensor_devices(spec))
    if found is None:
        return DeviceChoice("cpu", "no tensors (cpu)", spec)
    device = found
    if device.split(":", 1)[0] not in COMPILABLE:
        raise UsageError(
            f"the factory's tensors are on {device!r}, a device AOTInductor does not compile packages for",
            hint="return the model and example on cpu or cuda, or pass --device cpu|cuda[:N]",
        )
    _check_available(device)
    return DeviceChoice(device, "the factory's tensors", spec)


def _check_program_on(spec: BuildSpec, device: str, requested: str) -> None:
    """UsageError unless the saved program was exported on ``device``: its graph holds its device,
    so moving its state alone would be half a move. A CPU input beside it is its own placement."""

    def allowed(t: Placed) -> bool:
        return _normalise(t.device) == device or (not t.of_model and t.device == "cpu")

    elsewhere = sorted({t.device for t in tensor_devices(spec) if not allowed(t)})
    if elsewhere:
        raise UsageError(
            f"--device {requested} but the saved program was exported on {', '.join(elsewhere)}",
            hint="leave --device out (the program's own device is used), or export it again on that device",
        )


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


def cpu_inputs_beside(spec: BuildSpec) -> str | None:
    """A hint's words when the example keeps inputs on the CPU beside a model on another device
    (accepted by ``decide``; right when the model moves them itself, the likely cause when its
    eager run fails), None otherwise."""
    placed = list(tensor_devices(spec))
    model = {_normalise(t.device) for t in placed if t.of_model} - {"cpu"}
    on_cpu = [t.where for t in placed if not t.of_model and t.device == "cpu"]
    if len(model) != 1 or not on_cpu:
        return None
    (device,) = model
    names = ", ".join(on_cpu[:_NAMED]) + (" ..." if len(on_cpu) > _NAMED else "")
    return (
        f"the example keeps {names} on the CPU beside the model on {device} (kept there: a model may take an "
        f"input on the CPU and move it itself); if the model does not, put it on {device} in the factory, "
        f"or pass --device {device} to move everything"
    )
