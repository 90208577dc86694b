"""Model factories for tests/integration/test_resource_limits.py."""

from __future__ import annotations

from typing import Any

import torch


class Wide(torch.nn.Module):
    """16 MiB of weights: with them kept outside the .so, the build's own Python writes them."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2048, 2048)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x).relu()


def wide() -> Any:
    torch.manual_seed(21)
    return Wide().eval(), (torch.randn(2, 2048),)
