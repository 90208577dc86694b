"""BuildSpec: what a model factory hands to ``aoti-guard build``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BuildSpec"]


@dataclass
class BuildSpec:
    """A model and how to export it.

    Attributes:
        model: a ``torch.nn.Module`` (or an ``ExportedProgram``, then ``args`` may stay empty and its
            example inputs are used).
        args: example positional arguments, as for ``torch.export.export``.
        kwargs: example keyword arguments.
        dynamic_shapes: ``torch.export`` dynamic shapes (``Dim`` objects), same structure it takes.
        name: a label for reports (defaults to the model class name).
    """

    model: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    dynamic_shapes: Any = None
    name: str | None = None

    @property
    def label(self) -> str:
        return self.name or type(self.model).__name__
