"""The value checks of the guarded loader: integer inputs against the range the build recorded.

An id past an embedding table reads out of bounds (CPU: an abort of the whole process) or fires
a device-side assert that leaves the CUDA context unusable (GPU). The range is in the manifest
(``TensorSpec.value_range``). Two ways to check it:

- "sync" (``check_values=True``; the default): read the values before the call and raise
  InputContractError. On CUDA, reading them synchronises the device on every call.
- "device" (an option; ``DEFAULT_MODE`` holds each device's default): no read; clamped copies go to
  the native code and a bad call's outputs come back NaN (``DeviceValues``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from runtime_probe.guard.rules import Check
from runtime_probe.package.manifest import Manifest
from runtime_probe.reporting.errors import InputContractError, UsageError

__all__ = [
    "DEFAULT_MODE",
    "MODES",
    "DeviceValues",
    "check_mode_name",
    "device_problem",
    "resolve_mode",
    "value_check",
    "value_ranges",
    "with_value_check",
]


def with_value_check(check: Check, name: str, value_range: tuple[int, int], torch: Any) -> Check:
    """``check`` (the leaf's contract), then its values within ``value_range`` (inclusive)."""
    values = value_check(name, value_range, torch)

    def check_leaf_values(value: Any, env: Any) -> None:
        check(value, env)  # a plain dense tensor of the contract's dtype from here on
        values(value)

    return check_leaf_values


def value_check(name: str, value_range: tuple[int, int], torch: Any) -> Callable[[Any], None]:
    """The values of a tensor that passed its contract, within ``value_range`` (inclusive)."""
    lo, hi = value_range

    def check_values(value: Any) -> None:
        if value.numel() == 0 or value.dtype.is_floating_point or value.dtype.is_complex:
            return
        low, high = (int(v) for v in torch.aminmax(value))  # one reduction, one sync
        if low >= lo and high <= hi:
            return
        bad = ((value < lo) | (value > hi)).nonzero()[0].tolist()
        found = int(value[tuple(bad)])
        rows = f"; the table has {hi + 1} rows" if lo == 0 else ""
        raise InputContractError(
            f"{name} holds {found} at {bad}{rows} (valid values: {lo}..{hi})",
            code="input.value_range",
            argument=name,
            expected=f"{lo} <= {name} <= {hi}",
            found=f"{found} at {bad}",
            hint="the ids are out of the vocabulary/table the model was built with: check the tokenizer or the lookup that made them",
        )

    return check_values


# -- the default, and check_values="device" -------------------------------------------------------

# The value check a guarded model uses when ``load`` is not told (``check_values=None``), per device
# type: the ONE place to flip a default. "sync" reads the values before the call and raises
# InputContractError (on CUDA that synchronises the device on every call); "device" keeps the
# values on the device (clamped copies, outputs poisoned: DeviceValues below); "off" reads nothing.
# Measured on the lent H100 (docs/benchmarks.md, bench/value_check_cost.py): "device" costs more
# than "sync" there (each eager op is a launch of 8-20 µs), so "sync" is the default on CUDA too.
DEFAULT_MODE: dict[str, str] = {"cpu": "sync", "cuda": "sync"}
MODES = ("off", "sync", "device")


def resolve_mode(check_values: bool | str | None, device_type: str, manifest: Manifest) -> str:
    """The value check a guarded model runs: "off", "sync" or "device".

    ``None`` takes ``DEFAULT_MODE`` for the device type ("sync" where the default's "device" cannot
    cover the package: see ``device_problem``); ``True``/``False`` are "sync"/"off"; a mode's name is
    itself. Raises UsageError for an unknown name, or "device" asked for a package it cannot cover.
    """
    if check_values is None:
        mode = DEFAULT_MODE.get(device_type, "sync")
        return "sync" if mode == "device" and device_problem(manifest) is not None else mode
    if isinstance(check_values, bool):
        return "sync" if check_values else "off"
    check_mode_name(check_values)
    problem = device_problem(manifest) if check_values == "device" else None
    if problem is not None:
        raise UsageError(f"check_values='device' cannot cover this package: {problem}", hint="use check_values='sync'")
    return check_values


def check_mode_name(check_values: object) -> None:
    """UsageError unless ``check_values`` is None, a bool or a mode's name (the guarded loader asks
    before it reads anything; ``resolve_mode`` again)."""
    if check_values is not None and not isinstance(check_values, bool) and check_values not in MODES:
        raise UsageError(f"unknown check_values {check_values!r}", hint="use True, False, 'sync', 'device' or 'off'")


def device_problem(manifest: Manifest) -> str | None:
    """Why "device" cannot keep its promise for ``manifest`` (None when it can): it clamps top-level
    tensor arguments only, and can mark a bad call's outputs only where they can hold NaN."""
    for spec in manifest.io.inputs:
        if spec.tensor is not None and spec.tensor.value_range is not None and spec.name != spec.param:
            return f"the range-checked input {spec.name} is nested in an argument"
    for out in manifest.io.outputs:
        if out.tensor is not None and not (out.tensor.dtype.startswith(("float", "bfloat", "complex"))):
            return f"the output {out.name} is {out.tensor.dtype}, which cannot be marked invalid (NaN)"
    return None


def value_ranges(manifest: Manifest) -> dict[str, tuple[int, int]]:
    """Input leaf name -> its valid values (inclusive), for the inputs the build recorded one for."""
    return {s.name: s.tensor.value_range for s in manifest.io.inputs if s.tensor is not None and s.tensor.value_range is not None}


class DeviceValues:
    """``check_values="device"``: the value ranges checked on the device, without a sync.

    Before the call, every range-checked input is replaced by a clamped copy (``ids.clamp(lo, hi)``):
    no id can index outside its table, so the native code never reads out of bounds and no
    device-side assert fires (the process and its CUDA context live). A device flag records
    whether the copy equals the input. After the call every output is multiplied by a device scalar,
    1.0 when every id was in range (the outputs are then bit for bit the model's) and NaN otherwise:
    a call with an out-of-range id returns outputs that are NaN everywhere, never a plausible wrong
    row. ``raise_for_last_call()`` synchronises and raises the InputContractError the "sync" check
    raises (the argument, the value and its index) for the last call on this thread.

    Costs a clamp and an equality reduction per range-checked input, a ``where`` and one multiply
    per output: kernel launches, no host read. Measured on the H100 it costs more than "sync" (each
    eager op from Python is a launch of 8-20 µs against a 30-60 µs call): docs/benchmarks.md.
    """

    def __init__(self, manifest: Manifest, torch: Any) -> None:
        self.ranges = value_ranges(manifest)
        self._torch = torch
        self._last = threading.local()
        self._factors: dict[Any, tuple[Any, Any]] = {}  # device -> (1.0, NaN) on it: no scalar copied per call

    def clamp(self, named: list[tuple[str, Any]]) -> tuple[list[Any], Any]:
        """The clamped copies of ``named`` ((input name, tensor) of each range-checked input of a
        call, already checked against its contract) and the device flag: 0-dim, true when every
        value was in range."""
        torch = self._torch
        ok = None
        safe = []
        for name, t in named:
            lo, hi = self.ranges[name]
            c = t.clamp(lo, hi)
            same = torch.eq(c, t).all()  # 0-dim, on the device
            ok = same if ok is None else torch.logical_and(ok, same)
            safe.append(c)
        self._last.call = (ok, named)
        return safe, ok

    def poison(self, outputs: list[Any], ok: Any) -> list[Any]:
        """``outputs`` (a flat list) unchanged where ``ok``, NaN everywhere otherwise; non-tensors as
        they are."""
        if ok is None:
            return outputs
        torch = self._torch
        at = [i for i, t in enumerate(outputs) if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())]
        if not at:
            return outputs
        one_nan = self._factors.get(ok.device)
        if one_nan is None:
            one_nan = self._factors.setdefault(
                ok.device, (torch.ones((), device=ok.device), torch.full((), float("nan"), device=ok.device))
            )
        factor = torch.where(ok, *one_nan)
        out = list(outputs)
        for i in at:
            out[i] = outputs[i] * factor  # x * 1.0 is x bit for bit; anything * NaN is NaN
        return out

    def poison_tree(self, result: Any, ok: Any) -> Any:
        """``poison`` over a nested result (a tuple, a dict, a registered output type)."""
        from torch.utils import _pytree as pytree

        leaves, spec = pytree.tree_flatten(result)
        return pytree.tree_unflatten(self.poison(leaves, ok), spec)

    def raise_for_last_call(self) -> None:
        """Synchronise on the last call of this thread and raise InputContractError
        (``input.value_range``) when it had a value out of range; a no-op otherwise."""
        call = getattr(self._last, "call", None)
        self._last.call = None
        if call is None or call[0] is None or bool(call[0]):
            return
        for name, t in call[1]:
            value_check(name, self.ranges[name], self._torch)(t)
