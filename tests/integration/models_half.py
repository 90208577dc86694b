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


class _NanAtTheEdge(torch.nn.Module):
    """``y - y`` after ``y = x * x`` overflowed: inf - inf = NaN, in eager and (casts emulated) in
    the package alike; 0 on every ordinary sample."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * x
        return y - y


def nan_at_the_edge() -> Any:
    torch.manual_seed(0)
    return _NanAtTheEdge(), (torch.randn(4, 8, dtype=torch.float16),)


class _AddSub(torch.nn.Module):
    """bfloat16 ``(a + b) - b``: eager rounds ``a + b``, Inductor keeps it in float32, so on the
    edge-rounding sample the package is closer to float64 than eager, by far more than on any
    ordinary sample."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a + b) - b


def add_sub_bf16() -> Any:
    torch.manual_seed(0)
    return _AddSub(), (torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(4, 8, dtype=torch.bfloat16))


class _ScaledThreshold(torch.nn.Module):
    """A bfloat16 comparison that flips on torch 2.13 where pytorch#128306's ``scores > 0.2`` no
    longer does: eager rounds ``x * 1.001953125`` to bfloat16 (at x = bfloat16 0.2002 it stays
    0.2002, not above bfloat16's 0.2), Inductor keeps the product in float32 (0.2006 > 0.2). Only
    an input at exactly bfloat16 0.2002 flips, and float64 sides with the package."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x * 1.001953125) > 0.2).to(torch.float32)


def threshold_flip() -> Any:
    torch.manual_seed(28)
    return _ScaledThreshold(), (torch.rand(1, 4).to(torch.bfloat16),)
