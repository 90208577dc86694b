"""Model factories for the integration tests, one tiny model per case (used as build TARGETs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.export import Dim
from torch.utils import _pytree as pytree

from aoti_guard import BuildSpec


class Static(torch.nn.Module):
    """A static-shape model: sin(lin(x)) + 1."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.lin(x)) + 1.0


def static() -> Any:
    torch.manual_seed(1)
    return Static().eval(), (torch.randn(8, 16),)


class Mixed(torch.nn.Module):
    """Two positional inputs of different dtypes and a keyword-only tensor; two outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(10, 8)

    def forward(self, x: torch.Tensor, ids: torch.Tensor, *, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * scale.to(x.dtype) + self.emb(ids), ids * 2


def mixed() -> Any:
    torch.manual_seed(2)
    x = torch.randn(4, 8)
    ids = torch.randint(0, 10, (4,))
    scale = torch.rand(8, dtype=torch.float16) + 0.5
    return Mixed().eval(), (x, ids), {"scale": scale}


class Buffers(torch.nn.Module):
    """Persistent and non-persistent buffers and a lifted tensor constant."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(12, 12)
        self.register_buffer("running", torch.linspace(-1, 1, 12))
        self.register_buffer("table", torch.arange(12, dtype=torch.float32) / 12, persistent=False)
        self.offset = torch.full((12,), 0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.running + self.table + self.offset


def buffers() -> Any:
    torch.manual_seed(3)
    batch = Dim("rows", min=2, max=32)
    return BuildSpec(Buffers().eval(), (torch.randn(6, 12),), {}, {"x": {0: batch}}, name="buffers")


class Nan(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x) * 2  # negative inputs -> NaN


def nan() -> Any:
    return Nan(), (torch.linspace(-1, 1, 16).reshape(4, 4),)


def raising() -> Any:
    raise ValueError("the checkpoint path is wrong")


class DataDependent(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # data-dependent control flow: not exportable
            return x * 2
        return x - 1


def data_dependent() -> Any:
    return DataDependent(), (torch.randn(4, 4),)


def not_a_model() -> Any:
    return 42


class SqrtChain(torch.nn.Module):
    """Finite on positive inputs; a negative input makes the sqrt kernel produce NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.sqrt(x) * 2.0, dim=-1) + self.lin(x).relu()


def sqrt_chain() -> Any:
    torch.manual_seed(4)
    return SqrtChain().eval(), (torch.rand(4, 8) + 0.5,)


class ReluChain(torch.nn.Module):
    """Pointwise ops around one relu: the target of Inductor's testing-only relu bug (kept small:
    the minifier compiles every candidate graph)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0) + x


def relu_chain() -> Any:
    torch.manual_seed(4)
    return ReluChain(), (torch.randn(8, 16),)


class NoOnnx(torch.nn.Module):
    """torch.special.i0 lowers to prims.bessel_i0, which the dynamo ONNX exporter cannot translate."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.i0(x) * 0.5 + x


def no_onnx() -> Any:
    torch.manual_seed(5)
    return NoOnnx(), (torch.randn(4, 8),)


# -- library pytree types (issue 12) ---------------------------------------------------------------
# A dataclass output registered the way transformers registers its ModelOutput types: under a
# serialized type name whose module ("aoti_guard_testlib") exists in no other process. The build's
# validation child, the probe and the guarded loader must all work without importing it.


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor
    pooled: torch.Tensor


pytree.register_dataclass(EncoderOutput, serialized_type_name="aoti_guard_testlib.outputs.EncoderOutput")


class TinyEncoder(torch.nn.Module):
    """Embedding + linear over token ids; returns a library-style dataclass output."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> EncoderOutput:
        h = torch.tanh(self.lin(self.emb(input_ids))) * attention_mask.unsqueeze(-1).to(torch.float32)
        return EncoderOutput(last_hidden_state=h, pooled=h.mean(dim=1))


def encoder_output() -> Any:
    """Batch and a derived sequence length (a multiple of 8, as export suggests for many models)."""
    torch.manual_seed(5)
    batch, seq8 = Dim("batch", min=1, max=4), Dim("seq8", min=1, max=4)
    ids = torch.randint(0, 50, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    dims = {"input_ids": {0: batch, 1: 8 * seq8}, "attention_mask": {0: batch, 1: 8 * seq8}}
    return BuildSpec(TinyEncoder().eval(), (), {"input_ids": ids, "attention_mask": mask}, dims, name="tiny_encoder")


class Shifted(torch.nn.Module):
    """Two inputs tied by a derived size: y has one more row than x (s0 + 1)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x[:1]], dim=0) * 2.0 + y


def shifted() -> Any:
    torch.manual_seed(6)
    n = Dim("n", min=2, max=12)
    x, y = torch.randn(5, 4), torch.randn(6, 4)
    return BuildSpec(Shifted().eval(), (x, y), {}, {"x": {0: n}, "y": {0: n + 1}}, name="shifted")


class MaskedSoftmax(torch.nn.Module):
    """Attention scores masked to -inf; a fully masked row makes softmax 0/0 = NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self.lin(x).masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1) * 2.0


def masked_softmax() -> Any:
    torch.manual_seed(6)
    mask = torch.zeros(4, 8, dtype=torch.bool)
    mask[1] = True  # row 1 fully masked
    return MaskedSoftmax().eval(), (torch.randn(4, 8), mask)


class Embed(torch.nn.Module):
    """A token embedding of 1000 rows: ids index the table."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(1000, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids).sum(dim=1)


def embed() -> Any:
    torch.manual_seed(7)
    return Embed().eval(), (torch.randint(0, 1000, (4, 6)),)


class Groups8(torch.nn.Module):
    """Sums a sequence in groups of 8: torch.export refuses a free sequence length for it and
    suggests ``seq = 8*_seq`` (as it does for BERT's attention on CUDA)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], -1, 8).sum(-1) * 2.0


def groups8() -> Any:
    torch.manual_seed(8)
    return Groups8().eval(), (torch.randn(2, 32),)


class WeightedSqrt(torch.nn.Module):
    """Two 512x512 layers (2 MiB of weights) and a sqrt: weights that dominate its .so, and a NaN
    on a negative input for the escalation to reach the twin."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(512, 512)
        self.second = torch.nn.Linear(512, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.sqrt(x) + self.first(x).relu())


def weighted_sqrt() -> Any:
    torch.manual_seed(5)
    return WeightedSqrt().eval(), (torch.rand(4, 512) + 0.5,)


class SizeBranch(torch.nn.Module):
    """Branches on its input's size: torch.export traces the branch of the example (h*w == 64)
    and keeps the guard ``(L['x'].size()[1]*L['x'].size()[2]) == 64``; AOTInductor does not
    check it, so the bare package computes sin(x) + 1 for every size."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] * x.shape[2] == 64:
            return x.sin() + 1
        return x.cos() * 2


def size_branch() -> Any:
    torch.manual_seed(9)
    h, w = Dim("h", min=2, max=32), Dim("w", min=2, max=32)
    return BuildSpec(SizeBranch().eval(), (torch.randn(2, 8, 8),), {}, {"x": {1: h, 2: w}}, name="size_branch")


class SizeRelation(torch.nn.Module):
    """Adds y to x where their lengths are equal: declared as two dynamic dims, export unifies
    them into one symbol and keeps the guard ``L['x'].size()[0] == L['y'].size()[0]``."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == y.shape[0]:
            return x + y
        return x * 2 + y.sum(0)


def size_relation() -> Any:
    torch.manual_seed(10)
    dynamic = {"x": {0: Dim.DYNAMIC}, "y": {0: Dim.DYNAMIC}}
    return BuildSpec(SizeRelation().eval(), (torch.randn(3, 2), torch.randn(3, 2)), {}, dynamic, name="size_relation")


class MaskedNan(torch.nn.Module):
    """An additive attention mask that holds -inf by design (graph input ``mask``, and the scores
    buffer ``baddbmm`` writes from it), and a sqrt elsewhere that turns NaN on a negative ``x``:
    the debug twin must name the sqrt's kernel, not the mask (issue 26)."""

    def __init__(self) -> None:
        super().__init__()
        self.q = torch.nn.Linear(16, 16)
        self.k = torch.nn.Linear(16, 16)
        self.v = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = torch.baddbmm(mask, self.q(x), self.k(x).transpose(1, 2), alpha=0.25)
        attn = torch.softmax(scores, dim=-1) @ self.v(x)
        return attn * torch.sqrt(x) + 1.0  # x < 0 -> NaN here, nowhere else


def causal_mask(batch: int, seq: int) -> torch.Tensor:
    """The additive causal mask: 0 on and below the diagonal, -inf above it."""
    return torch.full((seq, seq), float("-inf")).triu(1).expand(batch, seq, seq).contiguous()


def masked_nan() -> Any:
    torch.manual_seed(11)
    return MaskedNan().eval(), (torch.rand(2, 6, 16) + 0.5, causal_mask(2, 6))


class ViewParameter(torch.nn.Module):
    """A parameter that is a slice of a larger tensor: 10 x 256 floats (10 KB) on a 20 MB storage."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(20000, 256)[:10])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


def view_parameter() -> Any:
    torch.manual_seed(12)
    return ViewParameter().eval(), (torch.randn(3, 10),)


def flatten_like_cudnn(rnn: torch.nn.RNNBase) -> None:
    """``rnn.flatten_parameters()``; where that is a no-op (on the CPU it flattens nothing), the
    same layout by hand: every parameter a view of one flat buffer, as cuDNN's flattening leaves it."""
    rnn.flatten_parameters()
    params = list(rnn.parameters())
    if len({p.untyped_storage().data_ptr() for p in params}) == 1:
        return
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    offset = 0
    with torch.no_grad():
        for p in params:
            p.data = flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()


class FlatGRU(torch.nn.Module):
    """A GRU whose parameters share one flat storage (after flatten_parameters()): 4.7 MB of weights."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.GRU(256, 512, batch_first=True)
        flatten_like_cudnn(self.rnn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


def flat_gru() -> Any:
    torch.manual_seed(13)
    return FlatGRU().eval(), (torch.randn(2, 3, 256),)


class DataCheck(torch.nn.Module):
    """The model checks a value read from a tensor (pytorch#150539 class): ``b = x.item()``,
    ``torch._check(b < y.shape[0])``, then ``y[:b]``. Export keeps the check as a runtime assert
    over an unbacked symbol; the build must generate samples that satisfy it and record it."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        b = x.item()
        torch._check(b >= 0)
        torch._check(b < y.shape[0])
        return y[:b] * 2


def data_check() -> Any:
    torch.manual_seed(11)
    return BuildSpec(
        DataCheck(), (torch.tensor(2), torch.randn(5, 3)), {}, {"x": None, "y": {0: Dim("n", min=2, max=64)}}, name="data_check"
    )
