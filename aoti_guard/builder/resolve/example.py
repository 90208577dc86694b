"""The bundled example model: what ``aoti-guard build`` builds when given no target.

Small on purpose, but it exercises the contract: two inputs of different dtypes that share a
dynamic batch dimension (1..64), parameters, and a buffer.
"""

from __future__ import annotations

from typing import Any

from aoti_guard.spec import BuildSpec

__all__ = ["example_spec"]


def _example_module() -> Any:
    import torch

    class ExampleModel(torch.nn.Module):
        """y = out(where(mask, relu(proj(x)) * scale, 0))."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(16, 32)
            self.out = torch.nn.Linear(32, 8)
            self.register_buffer("scale", torch.linspace(0.5, 1.5, 32))

        scale: torch.Tensor

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.proj(x)) * self.scale
            h = torch.where(mask, h, torch.zeros_like(h))
            out: torch.Tensor = self.out(h)
            return out

    return ExampleModel


def example_spec() -> BuildSpec:
    """The example model with a batch of 4, batch dimension dynamic in [1, 64]."""
    import torch
    from torch.export import Dim

    torch.manual_seed(0)
    model = _example_module()().eval()
    x = torch.randn(4, 16)
    mask = torch.rand(4, 32) > 0.3
    batch = Dim("batch", min=1, max=64)
    return BuildSpec(model, (x, mask), {}, {"x": {0: batch}, "mask": {0: batch}}, name="example")
