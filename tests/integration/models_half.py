"""Half-precision models at the dtype's edge (tests/integration/test_half_precision.py)."""

from __future__ import annotations

from typing import Any

import torch


class _Overflow(torch.nn.Module):
    """pytorch#183607: eager rounds ``x * x`` to float16 (inf from |x| > 256); Inductor keeps it in
    float32 inside the fused kernel, so ``y / x`` and ``isinf(y)`` differ at the edge only."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x * x
        return y, y / x, torch.isinf(y), torch.where(torch.isinf(y), torch.zeros_like(y), y)


def overflow() -> Any:
    torch.manual_seed(0)
    return _Overflow(), (torch.randn(4, 8, dtype=torch.float16),)


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.norm(torch.nn.functional.gelu(self.a(x)))).softmax(-1)


def mlp_fp16() -> Any:
    """float16 that is fine: at the edge, eager and the package overflow alike."""
    torch.manual_seed(0)
    return _Mlp().eval().half(), (torch.randn(4, 8, dtype=torch.float16),)
