"""CUDA models for the GPU validation (build TARGETs), one per failure the probe must explain.

- ``example_cuda``: the bundled example on cuda.
- ``gather``: a user Triton kernel that reads ``x[idx]`` with no bounds check. The fault depends on
  the data in ``idx``, so Inductor's compile-time autotuning (valid example indices) does not trip
  it; an index far out of range makes a runtime illegal memory access.
- ``nan_chain``: matmul -> sqrt(h - 1) -> sum. Finite on the example inputs; inputs that drive
  ``h`` below 1 make the sqrt kernel produce NaN, which the next kernels carry on.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from torch.export import Dim

from aoti_guard import BuildSpec


@triton.jit
def _gather_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    val = tl.load(x_ptr + idx, mask=mask)  # deliberately unchecked: idx is trusted
    tl.store(out_ptr + offs, val, mask=mask)


@torch.library.triton_op("aoti_guard_gpu::gather", mutates_args={})
def unchecked_gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.empty(idx.shape, device=x.device, dtype=x.dtype)
    n = idx.numel()
    torch.library.wrap_triton(_gather_kernel)[(triton.cdiv(n, 128),)](x, idx, out, n, BLOCK=128)
    return out


class Gather(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(1, 2, 256))

    def forward(self, table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        picked = unchecked_gather(table, idx)
        return picked * self.scale[: picked.shape[0]].sum() + 1.0


def gather() -> Any:
    torch.manual_seed(0)
    table = torch.randn(4096, device="cuda")
    idx = torch.randint(0, 4096, (256,), device="cuda")
    return Gather().cuda().eval(), (table, idx)


class NanChain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(32, 32) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x @ self.w
        r = torch.sqrt(h - 1.0)  # NaN where h < 1
        return torch.softmax(r, dim=-1).sum(-1)


def nan_chain() -> Any:
    torch.manual_seed(0)
    x = torch.rand(8, 32, device="cuda") + 1.0  # h well above 1: finite
    batch = Dim("batch", min=1, max=64)
    return BuildSpec(NanChain().cuda().eval(), (x,), {}, {"x": {0: batch}}, name="nan_chain")


def example_cuda() -> Any:
    from aoti_guard.builder.resolve.example import example_spec

    spec = example_spec()
    from torch.utils import _pytree as pytree

    move = lambda t: t.cuda() if isinstance(t, torch.Tensor) else t  # noqa: E731
    return BuildSpec(spec.model.cuda(), tuple(pytree.tree_map(move, list(spec.args))), {}, spec.dynamic_shapes, name="example_cuda")


class MaskedSoftmax(torch.nn.Module):
    """Scores masked to -inf; a fully masked row makes softmax 0/0 = NaN (issue 13 case 3)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.lin(x).masked_fill(mask, float("-inf")), dim=-1) * 2.0


def masked_softmax() -> Any:
    torch.manual_seed(6)
    mask = torch.zeros(8, 32, dtype=torch.bool, device="cuda")
    mask[1] = True
    return MaskedSoftmax().cuda().eval(), (torch.randn(8, 32, device="cuda"), mask)


class Embed(torch.nn.Module):
    """A token embedding of 1000 rows (issue 13 case 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(1000, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids).sum(dim=1)


def embed() -> Any:
    torch.manual_seed(7)
    return Embed().cuda().eval(), (torch.randint(0, 1000, (4, 6), device="cuda"),)
