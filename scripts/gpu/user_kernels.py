"""Factories for scripts/gpu/user_kernels_memcheck.sh (issue 43): a ``torch.library.triton_op``
whose Triton kernel reads and writes ``batch*96`` floats in blocks of 1024, with and without its
bounds mask. Unmasked, every batch whose ``batch*96`` is not a multiple of 1024 reads and writes
past the tensors; eager runs the same kernel, so validation alone passes it."""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from torch.export import Dim

from aoti_guard import BuildSpec

BLOCK = 1024


@triton.jit
def _double_unmasked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0)  # no mask=: past n at the last block


@triton.jit
def _double_masked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@torch.library.triton_op("aoti_guard_gpu::double_unmasked", mutates_args={})
def double_unmasked(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    torch.library.wrap_triton(_double_unmasked)[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


@torch.library.triton_op("aoti_guard_gpu::double_masked", mutates_args={})
def double_masked(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    torch.library.wrap_triton(_double_masked)[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out


class Head(torch.nn.Module):
    def __init__(self, op: Any) -> None:
        super().__init__()
        self.op = op
        self.lin = torch.nn.Linear(96, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(self.op(x))


def _spec(op: Any, name: str) -> BuildSpec:
    torch.manual_seed(0)
    x = torch.randn(4, 96, device="cuda")
    return BuildSpec(Head(op).cuda().eval(), (x,), {}, {"x": {0: Dim("batch", min=1, max=16)}}, name=name)


def unmasked() -> BuildSpec:
    return _spec(double_unmasked, "unmasked")


def masked() -> BuildSpec:
    return _spec(double_masked, "masked")


class CpuIds(torch.nn.Module):
    """A CPU int input the model moves to the GPU itself (issue 43 item: per-leaf devices)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(100, 16)

    def forward(self, ids: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.emb(ids.to(x.device)) + x
        return h, h.sum(-1).to("cpu")  # the second output returned on the CPU on purpose
