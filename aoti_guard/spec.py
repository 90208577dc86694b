"""BuildSpec: what a model factory hands to ``aoti-guard build``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
        samples: golden samples of your own, beside the generated ones: each a mapping from input
            name to tensor (one call's inputs) or a path to a .safetensors file holding them (as
            ``aoti-guard build --samples`` takes). Checked against the contract before anything
            compiles, validated like the generated samples, and stored in the package.
    """

    model: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    dynamic_shapes: Any = None
    name: str | None = None
    samples: Sequence[Any] = ()

    @property
    def label(self) -> str:
        return self.name or type(self.model).__name__
