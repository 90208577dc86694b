"""Where each input and output of a package lives: the one decision every reader of the manifest uses.

A CUDA model may take some inputs on the CPU on purpose (a CPU embedding table's ids) and return
some outputs there; AOTInductor serves that (docs/gpu-validation.md Run 28). The manifest records
each leaf's device type (``TensorSpec.device``, read off the factory's example and the exported
graph) and the package's one compiled device (``cuda:0``); a leaf whose type is the package's lives
on the package's device (its index too), any other leaf on its own type (``cpu``). The golden
samples' references (the build), the child's placement of the inputs, the guard's device rule and
the probe all ask here, so that a leaf is never placed by one reader and checked by another. The
outputs too: the guarded loader checks each returned tensor's device against ``output_devices``,
and the probe's golden phase judges the child's reply by it (an output left on the wrong device,
pytorch#152130's class, is refused by name).
"""

from __future__ import annotations

from typing import Any

from runtime_probe.package.manifest import InputSpec, Manifest

__all__ = ["input_record", "leaf_device", "on_device", "output_devices"]


def leaf_device(leaf_type: str, package_device: str) -> str:
    """The device a leaf of type ``leaf_type`` ("cpu", "cuda") lives on in a package compiled for
    ``package_device`` ("cpu", "cuda", "cuda:1")."""
    return package_device if leaf_type == package_device.split(":", 1)[0] else leaf_type


def input_record(spec: InputSpec) -> dict[str, Any]:
    """One input leaf as the child's ``run`` request carries it (child/ops.py ``RunRequest.inputs``):
    its name, kind, constant value, and a tensor's compiled strides and device type, which the
    child places by ``leaf_device``."""
    record: dict[str, Any] = {"name": spec.name, "kind": spec.kind, "value": spec.value, "stride": None}
    if spec.tensor is not None:
        record.update(stride=list(spec.tensor.stride), device=spec.tensor.device)
    return record


def output_devices(manifest: Manifest, package_device: str) -> dict[str, str]:
    """Each tensor output's name -> the device it must come back on (``leaf_device`` of its
    recorded type), in output order: the runner returns the tensor outputs alone, in this order."""
    return {o.name: leaf_device(o.tensor.device, package_device) for o in manifest.io.outputs if o.tensor is not None}


def on_device(found: str, expected: str) -> bool:
    """Whether a tensor on ``found`` ("cuda:0") is where ``expected`` says: the same device, or
    the same type where ``expected`` names no index ("cuda": a package loaded on the current device)."""
    if found == expected:
        return True
    found_type, _, found_index = found.partition(":")
    expected_type, _, expected_index = expected.partition(":")
    return found_type == expected_type and (not expected_index or found_index == expected_index)
