"""The guarded loader's output check: each returned tensor is where the manifest says it lives.

A CUDA model may return some outputs on the CPU on purpose (``output[1]: cpu``, recorded per
output by the build); a runtime that leaves one on another device (pytorch#152130's class) hands
the caller a tensor that fails later, far from the model, or is silently copied back. After the
native call every tensor output's device is compared with the one ``placement.output_devices``
gives, resolved to torch devices once at load, so a call pays one comparison per output.
"""

from __future__ import annotations

from typing import Any, NoReturn

from runtime_probe.package.manifest import Manifest
from runtime_probe.package.placement import on_device, output_devices
from runtime_probe.reporting.errors import OutputContractError

__all__ = ["OutputDevices"]


class OutputDevices:
    """The tensor outputs' devices of a manifest, for a package loaded on ``device``.

    ``check(flat)`` takes the runner's flat outputs (the tensor outputs, in the manifest's order)
    and returns them, or raises OutputContractError (``output.device``) naming the first output
    that came back elsewhere."""

    __slots__ = ("_expected", "check")

    def __init__(self, manifest: Manifest, device: Any, torch: Any) -> None:
        self._expected = [(name, torch.device(where)) for name, where in output_devices(manifest, str(device)).items()]
        self.check = self._compiled()

    def _compiled(self) -> Any:
        """``check`` as one straight-line function: a loop over (name, device) pairs cost 0.3 µs a
        call for one output, one ``flat[i].device != d_i`` test about 0.1 µs (CPython 3.11). Only
        indices are written into the source; the devices are its globals."""
        lines = ["def check(flat):", "    try:"]
        lines += [f"        if flat[{i}].device != d{i}: mismatch({i}, flat[{i}])" for i in range(len(self._expected))]
        lines += ["        pass"]  # a package whose outputs are all constants has no test to make
        # fewer outputs than recorded: the count is the caller's to judge, not this check's
        lines += ["    except IndexError:", "        pass", "    return flat"]
        env: dict[str, Any] = {f"d{i}": want for i, (_, want) in enumerate(self._expected)}
        env["mismatch"] = self._mismatch
        exec(compile("\n".join(lines), "<aoti-guard output devices>", "exec"), env)  # only indices are in the source
        return env["check"]

    def _mismatch(self, i: int, value: Any) -> None:
        """A device that differs from the recorded one as an object: refused unless the record
        names no index ("cuda": the package loaded on the current device) and the type agrees."""
        name, want = self._expected[i]
        if not on_device(str(value.device), str(want)):
            _refuse(name, str(want), str(value.device))

    def check_tree(self, outputs: Any) -> Any:
        """``check`` on a structured result (torch's own call): its tensor leaves, in order."""
        import torch
        from torch.utils import _pytree as pytree

        self.check([t for t in pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)])
        return outputs


def _refuse(name: str, expected: str, found: str) -> NoReturn:
    raise OutputContractError(
        f"output {name!r} came back on {found}; the package records {expected}",
        code="output.device",
        output=name,
        expected=expected,
        found=found,
        hint="the native code placed it elsewhere than the build recorded (an output left on the wrong device, "
        "pytorch#152130): do not copy it back; run `aoti-guard probe` on this host with the torch you serve with, "
        "and rebuild the package with that torch",
    )
