"""The forms of a rule in rules.py's table: a leaf's (``LeafRule``) and a call's (``CallRule``),
each a diagnosing check and a fast form; a leaf module, so that the modules holding rules of
their own (shape_guards.py, data_checks.py) share these types without importing the table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime_probe.guard.fastsource import FastSource
from runtime_probe.package.manifest import InputSpec, IOContract, TensorSpec

if TYPE_CHECKING:
    from runtime_probe.guard.env import Env

__all__ = ["CallRule", "Check", "Leaf", "LeafRule", "Rule"]

Check = Callable[[Any, "Env"], None]
# A rule of a leaf: (value, value.shape, env) -> None, or raises InputContractError. The first
# rule of a tensor (what the value is) gets shape None: it runs before .shape is read.
Rule = Callable[[Any, Any, "Env"], None]


@dataclass(frozen=True)
class Leaf:
    """What a leaf's rules are compiled from: its contract, the model's device, torch, and the
    symbol its value gives (``reads``: a data-dependent check reads ``x.item()``; None: none)."""

    spec: InputSpec
    device: Any
    torch: Any
    reads: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def tensor(self) -> TensorSpec:
        assert self.spec.tensor is not None  # the table gives tensor rules tensor leaves only
        return self.spec.tensor


@dataclass(frozen=True)
class LeafRule:
    """One rule of a leaf in both forms. ``check``: the diagnosing rule (None: nothing to check
    for this leaf); ``fast``: its lines in the generated function (fastpath.py), or it raises
    NoFastForm. ``codes``: the error codes ``check`` raises."""

    name: str
    kind: str  # the leaves it applies to: "tensor" | "constant"
    codes: tuple[str, ...]
    check: Callable[[Leaf], Rule | None]
    fast: Callable[[Leaf, FastSource], list[str]]


@dataclass(frozen=True)
class CallRule:
    """A rule over a whole call, checked once every leaf has bound its symbols (``Env.finish``)."""

    name: str
    codes: tuple[str, ...]
    check: Callable[[IOContract], Callable[[Env], None] | None]
    fast: Callable[[IOContract, FastSource], list[str]]
