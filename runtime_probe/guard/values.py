"""The value check of ``check_values=True``: integer inputs against the range the build recorded.

An id past an embedding table reads out of bounds (CPU) or fires a device-side assert that
poisons the CUDA context (GPU). The range is in the manifest (``TensorSpec.value_range``); this
reads the values, so it synchronises the GPU, and runs only when asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime_probe.errors import InputContractError
from runtime_probe.guard.rules import Check

__all__ = ["value_check", "with_value_check"]


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
