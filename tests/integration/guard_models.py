"""Build TARGETs for the guarded loader's tests of issue 25.

- Sizes that are derived expressions (``8*k``, ``16*h16`` x ``16*w16``, ``s + 1``) over examples whose
  layout is not contiguous (defect 1): the guard must check their strides once the derived symbols
  are bound. Each factory's model and example are also exported in the test process
  (``exported``), as the oracle of the property test.
- A tiny DistilBERT classifier (defect 2): an id past its vocabulary aborted the process on CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch.export import Dim

from aoti_guard import BuildSpec


class Plain(torch.nn.Module):
    """A linear layer over a plain symbolic batch: ``k`` x 8."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.lin(x)) + x


def plain_k() -> Any:
    """``{0: k}`` over a contiguous float16 example."""
    torch.manual_seed(11)
    k = Dim("k", min=2, max=32)
    return BuildSpec(Plain().eval().half(), (torch.randn(6, 8).half(),), {}, {"x": {0: k}}, name="plain_k")


class Rows(torch.nn.Module):
    """Reads its input in the layout it was compiled for: a scale per row, a sum over columns."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.arange(x.shape[0], dtype=x.dtype, device=x.device)
        return x * scale[:, None] + x.sum(dim=1, keepdim=True)


def transposed_8k() -> Any:
    """``{0: 8*s}`` exported from a transposed example (strides ``(1, 8*s)``): on main a contiguous
    input of the same shape was accepted, off by up to 8.0."""
    torch.manual_seed(12)
    s = Dim("s", min=1, max=8)
    x = torch.randn(4, 16, dtype=torch.float64).t()  # [16, 4], strides (1, 16)
    return BuildSpec(Rows().eval(), (x,), {}, {"x": {0: 8 * s}}, name="transposed_8k")


def transposed_s1() -> Any:
    """``{0: s + 1}`` exported from a transposed example (strides ``(1, s + 1)``)."""
    torch.manual_seed(13)
    s = Dim("s", min=2, max=16)
    x = torch.randn(4, 7, dtype=torch.float64).t()  # [7, 4], strides (1, 7)
    return BuildSpec(Rows().eval(), (x,), {}, {"x": {0: s + 1}}, name="transposed_s1")


class Normalized(torch.nn.Module):
    """``relu(conv((img - mean) / std))``, an image model's first layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv((img - self.mean) / self.std))


def channels_last_16hw() -> Any:
    """A channels_last image with ``{2: 16*h16, 3: 16*w16}``: on main a plain NCHW image was
    accepted, off by up to 2.84."""
    torch.manual_seed(14)
    h16, w16 = Dim("h16", min=1, max=4), Dim("w16", min=1, max=4)
    img = torch.rand(2, 3, 32, 48).contiguous(memory_format=torch.channels_last)
    model = Normalized().eval().to(memory_format=torch.channels_last)
    return BuildSpec(model, (img,), {}, {"img": {2: 16 * h16, 3: 16 * w16}}, name="channels_last_16hw")


def channels_last_square() -> Any:
    """A square channels_last image, one symbol for both sides: the strides ``768*h16**2`` use a power
    (a manifest the archive checks refused before symexpr took one)."""
    torch.manual_seed(15)
    h16 = Dim("h16", min=1, max=4)
    img = torch.rand(1, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    model = Normalized().eval().to(memory_format=torch.channels_last)
    return BuildSpec(model, (img,), {}, {"img": {2: 16 * h16, 3: 16 * h16}}, name="channels_last_square")


def exported(spec: BuildSpec) -> Any:
    """The ExportedProgram of a factory's spec, as the build exports it (the test's oracle)."""
    return torch.export.export(spec.model, tuple(spec.args), dict(spec.kwargs), dynamic_shapes=spec.dynamic_shapes)


def distilbert() -> Any:
    """transformers' DistilBertForSequenceClassification from a tiny config (the zoo's small
    DistilBERT: zoo/models.py), random weights; ``input_ids`` and ``attention_mask`` [batch, seq]."""
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from zoo.models import ensure_torchvision_importable

    ensure_torchvision_importable()  # transformers imports torchvision, a CUDA build here
    import transformers

    torch.manual_seed(16)
    cfg = transformers.DistilBertConfig(
        dim=64, n_layers=2, n_heads=2, hidden_dim=128, vocab_size=1000, max_position_embeddings=256, num_labels=3
    )
    cfg._attn_implementation = "eager"  # plain matmul/softmax attention
    model = transformers.DistilBertForSequenceClassification(cfg).eval()
    ids = torch.randint(0, 1000, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.int64)
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=64)
    dims = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    return BuildSpec(model, (), {"input_ids": ids, "attention_mask": mask}, dims, name="distilbert")
