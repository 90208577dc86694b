"""Models whose compiled package differs from eager for a reason the build must name truthfully
(tests/integration/test_divergence.py): state, chance, an export guard, Inductor's arithmetic."""

from __future__ import annotations

from typing import Any

import torch
from torch.export import Dim


class _DropoutHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.lin(x)).relu()


def dropout_train() -> Any:
    """Left in training mode: its Dropout is active (no .eval())."""
    torch.manual_seed(0)
    return _DropoutHead(), (torch.randn(4, 16),)


def dropout_eval() -> Any:
    torch.manual_seed(0)
    return _DropoutHead().eval(), (torch.randn(4, 16),)


class _Noisy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand_like(x)


def noisy() -> Any:
    return _Noisy(), (torch.randn(4, 16),)


class _Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return x * self.count


def counter() -> Any:
    return _Counter(), (torch.randn(4, 8),), {}, {"x": {0: Dim("batch", min=2, max=16)}}


class _BigSum(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 1.1).sum(dim=-1)


def big_sum() -> Any:
    """Inductor's CPU reduction sums in another order than ATen's: ~1e-6 relative, an honest
    departure of the Inductor stage when the build is asked for exact agreement."""
    torch.manual_seed(0)
    return _BigSum(), (torch.randn(4, 100003),)


class _Branch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] * x.shape[2] == 64:
            return x.sin() + 1
        return x.cos() * 2


def branch() -> Any:
    """Export traces the h*w == 64 branch and guards it; AOTI does not enforce the guard."""
    return _Branch(), (torch.randn(2, 8, 8),), {}, {"x": {1: Dim("h", min=2, max=32), 2: Dim("w", min=2, max=32)}}
