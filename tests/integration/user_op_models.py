"""A model with a ``torch.library.custom_op`` (issue 43): the op is registered when this module is
imported, so a process that loads the compiled package must import it first (``probe --import``)."""

from __future__ import annotations

from typing import Any

import torch


@torch.library.custom_op("aoti_guard_tests::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x) * scale


@scaled_tanh.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


class WithUserOp(torch.nn.Module):
    """lin -> the user op -> + 1."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scaled_tanh(self.lin(x), 2.0) + 1.0


def with_user_op() -> Any:
    torch.manual_seed(3)
    return WithUserOp().eval(), (torch.randn(4, 8),)
