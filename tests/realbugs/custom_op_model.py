"""A model calling a ``torch.library.custom_op`` written in Python (#145394, #134581).

Importing this module registers the op; the serving case that must not have it imports only
tests/realbugs/models.py.
"""

from __future__ import annotations

from typing import Any

import torch


@torch.library.custom_op("realbugs::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x) * scale


@scaled_tanh.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


class UsesOp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.realbugs.scaled_tanh(x + 1.0, 2.0)


def custom_op() -> Any:
    torch.manual_seed(45)
    return UsesOp(), (torch.randn(4, 8),)


def serve() -> tuple[tuple[Any, ...], dict[str, Any]]:
    torch.manual_seed(46)
    return (torch.randn(4, 8),), {}
