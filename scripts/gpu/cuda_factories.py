"""Factories as GPU users write them: the model and its example made on ``cuda`` inside the
factory, built WITHOUT ``--device`` (scripts/gpu/device_from_factory.sh, issue 43)."""

from __future__ import annotations

from typing import Any

import torch


class ConvHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3)))


def conv_on_cuda() -> Any:
    """Everything on cuda, as the issue's user wrote it; the batch dynamic."""
    model = ConvHead().cuda().eval()
    x = torch.randn(4, 3, 16, 16, device="cuda")
    return model, (x,), {}, {"x": {0: torch.export.Dim("batch", min=1, max=32)}}


def mixed_devices() -> Any:
    """The model on cuda, the example left on the CPU: a usage error naming both."""
    return ConvHead().cuda().eval(), (torch.randn(4, 3, 16, 16),)


class CpuIds(torch.nn.Module):
    """A CPU embedding's ids beside a CUDA model: the model moves them itself, and returns one
    output on the CPU (docs/gpu-validation.md Run 28: AOTI serves both)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(100, 16)

    def forward(self, ids: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.emb(ids.to(x.device)) + x
        return h, h.sum(-1).to("cpu")


def cpu_ids_on_cuda() -> Any:
    """The model and x on cuda, the ids on the CPU on purpose: built as they are (no --device)."""
    return CpuIds().cuda().eval(), (torch.randint(0, 100, (4, 8)), torch.randn(4, 8, 16, device="cuda"))
