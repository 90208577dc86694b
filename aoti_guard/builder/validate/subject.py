"""``Subject``: what validation, the stage bisection and the repro all judge, as one value.

The exported program, the eager model it came from, its I/O contract, the Inductor configs the
release was compiled with, the build's options and its tolerance (resolved once,
validate/tolerance.py) travel together through every step that reruns or judges the program; one
frozen value instead of the same eight arguments at each call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.validate.tolerance import ToleranceRule
from runtime_probe.package.manifest import IOContract

__all__ = ["Subject"]


def _silent(_message: str) -> None:
    """A progress line nobody reads (a test's, or a caller without progress)."""


@dataclass(frozen=True)
class Subject:
    """The program under validation and the decisions it is judged by.

    ``configs``: the release's Inductor configs (the repro compiles with them). ``graph_causes``:
    what the export step found in the graph (random ops, buffer updates), named when eager itself
    departs. ``note``: the build's progress line."""

    ep: Any
    eager_fn: Any
    contract: IOContract
    configs: Mapping[str, Any]
    options: BuildOptions
    tolerance: ToleranceRule
    graph_causes: Sequence[str] = ()
    note: Callable[[str], None] = _silent

    @property
    def device(self) -> str:
        return self.options.device
