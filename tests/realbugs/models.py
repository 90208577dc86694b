"""Small models re-expressed from public reports (tests/realbugs/cases.py names the report of each),
and the inputs and weights a serving process hands them.

Each factory is a build TARGET (``tests/realbugs/models.py:NAME``) and is what the bare side exports
when it compiles a model itself. Each ``serve_*`` function returns ``(args, kwargs)``: one call's
inputs as a user sent them (the mistake of the report). Each ``weights_*`` function returns the
``{name: tensor}`` map a user gave ``load_constants``. Everything is seeded: both sides, in separate
processes, make the same tensors.

The custom-op model lives in ``custom_op_model.py`` so that importing this module registers no op
(the serving process of that case must not have it).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import Dim

from aoti_guard import BuildSpec

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


def _static() -> Any:
    """The integration tests' ``static`` model (sin(lin(x)) + 1, x float32 [8, 16]): its package is
    shared with them (tests/integration/conftest.py builds it under the same name and flags)."""
    from tests.integration.models import static

    return static()


# -- layout / shape mistakes on the static model --------------------------------------------------


def serve_transposed() -> Inputs:
    """#122784: the right shape, the wrong memory order (a transpose somewhere upstream), into the
    pointwise ``python_flag`` model (x * 2.0 on float32 [4, 8]), as the report's mul+sum was."""
    torch.manual_seed(11)
    return (torch.randn(8, 4).t(), True), {}


def serve_batch16() -> Inputs:
    """#151582: a batch larger than the one the package was exported with."""
    torch.manual_seed(12)
    return (torch.randn(16, 16),), {}


def serve_x_static() -> Inputs:
    torch.manual_seed(13)
    return (torch.randn(8, 16),), {}


# -- weights handed to load_constants (the static model's lin.weight is float32 [16, 16]) ----------


def _state() -> dict[str, torch.Tensor]:
    model, _ = _static()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def weights_full() -> dict[str, torch.Tensor]:
    """The right weights, as a ``state_dict()`` gives them (a package without packaged weights)."""
    return _state()


def weights_transposed() -> dict[str, torch.Tensor]:
    """#180446: a weight stored transposed (a checkpoint from a framework with the other layout),
    handed over as a ``.t()`` view: same shape, other memory order."""
    state = _state()
    state["lin.weight"] = (state["lin.weight"] * 0.5).t().contiguous().t()
    return state


def weights_bf16() -> dict[str, torch.Tensor]:
    """#179225: a bfloat16 checkpoint loaded into a float32 package."""
    state = _state()
    state["lin.weight"] = (state["lin.weight"] * 0.5).to(torch.bfloat16)
    return state


def weights_one_larger() -> dict[str, torch.Tensor]:
    """#179225: a weight one row larger than the compiled one (a vocabulary grown by one)."""
    state = _state()
    state["lin.weight"] = torch.cat([state["lin.weight"], torch.ones(1, 16)])
    return state


# -- a Python constant argument (#135796) -----------------------------------------------------------


class Scaled(torch.nn.Module):
    def forward(self, x: torch.Tensor, double: bool = True) -> torch.Tensor:
        return x * 2.0 if double else x + 1.0


def python_flag() -> Any:
    torch.manual_seed(14)
    return Scaled(), (torch.randn(4, 8), True)


def serve_flag_false() -> Inputs:
    torch.manual_seed(15)
    return (torch.randn(4, 8), False), {}


# -- a reshape that only some sizes allow (#151925) ------------------------------------------------


class Hundred(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(100, -1).softmax(-1)


def reshape_100() -> Any:
    torch.manual_seed(16)
    return BuildSpec(Hundred(), (torch.randn(50, 4),), {}, {"x": {0: Dim("rows", min=25, max=400)}}, name="reshape_100")


def serve_rows_30() -> Inputs:
    torch.manual_seed(17)
    return (torch.randn(30, 4),), {}


# -- a channel slice (#153992) ----------------------------------------------------------------------


class Conv36(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(36, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).relu()


def conv36() -> Any:
    torch.manual_seed(18)
    return Conv36().eval(), (torch.randn(1, 36, 8, 8),)


def serve_nine_channels() -> Inputs:
    """A 9-channel slice of a 36-channel tensor: what a group split upstream hands over."""
    torch.manual_seed(19)
    return (torch.randn(1, 36, 8, 8)[:, :9],), {}


# -- a lowering pass that specialises on the example's size (#150364) ------------------------------


class Sin(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sin() + 0.5


def _size_pass(graph: torch.fx.Graph) -> None:
    """A user's post-grad pass that rewrites sin to cos when the example has more than 5 rows: the
    compiled model then holds the example's branch for every size."""
    first = next(iter(graph.nodes))
    if first.meta["val"].shape[0] > 5:
        for node in graph.nodes:
            if node.target is torch.ops.aten.sin.default:
                node.target = torch.ops.aten.cos.default


def lowering_pass() -> Any:
    import torch._inductor.config as inductor_config

    inductor_config.post_grad_custom_post_pass = _size_pass
    torch.manual_seed(20)
    return BuildSpec(Sin(), (torch.randn(6, 5),), {}, {"x": {0: Dim("rows", min=2, max=64)}}, name="lowering_pass")


def serve_rows_4() -> Inputs:
    torch.manual_seed(21)
    return (torch.randn(4, 5),), {}


# -- a data-dependent check (#150539) ---------------------------------------------------------------


class Prefix(torch.nn.Module):
    def forward(self, b: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n = b.item()
        torch._check(n >= 0)
        torch._check(n < y.shape[0])
        return y[:n] * 2.0


def data_dependent_check() -> Any:
    torch.manual_seed(22)
    return BuildSpec(Prefix(), (torch.tensor(3), torch.randn(6, 4)), {}, {"b": None, "y": {0: Dim("ylen", min=2, max=32)}}, name="prefix")


def serve_b_past_y() -> Inputs:
    """b=4 with y of 3 rows: the model's own check is broken."""
    torch.manual_seed(23)
    return (torch.tensor(4), torch.randn(3, 4)), {}


# -- half precision (#183607, #159239, #182225, #128306) ---------------------------------------------


class Square16(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x * x
        return y, y / x, torch.isinf(y), torch.where(torch.isinf(y), torch.zeros_like(y), y)


def fp16_overflow() -> Any:
    torch.manual_seed(24)
    return Square16(), (torch.rand(4, 8, dtype=torch.float16) + 0.5,)


def serve_near_300() -> Inputs:
    """Values near 300: their squares overflow float16 (max 65504)."""
    torch.manual_seed(25)
    return (torch.full((4, 8), 300.0, dtype=torch.float16) + torch.rand(4, 8, dtype=torch.float16),), {}


class RopeBf16(torch.nn.Module):
    """Rotary embedding applied in bfloat16 with no upcast (as some decoders write it)."""

    def forward(self, q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = q.shape[-1] // 2
        rotated = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
        return q * cos + rotated * sin


def bf16_rope() -> Any:
    torch.manual_seed(26)
    q = (torch.randn(1, 2, 7, 16) * 4).to(torch.bfloat16)
    cos = torch.randn(1, 1, 7, 16).to(torch.bfloat16)
    sin = torch.randn(1, 1, 7, 16).to(torch.bfloat16)
    return RopeBf16(), (q, cos, sin)


def serve_rope() -> Inputs:
    torch.manual_seed(27)
    return (
        (torch.randn(1, 2, 7, 16) * 4).to(torch.bfloat16),
        torch.randn(1, 1, 7, 16).to(torch.bfloat16),
        torch.randn(1, 1, 7, 16).to(torch.bfloat16),
    ), {}


class Threshold(torch.nn.Module):
    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return (scores > 0.2).to(torch.float32)


def bf16_threshold() -> Any:
    torch.manual_seed(28)
    return Threshold(), (torch.rand(1, 4).to(torch.bfloat16),)


def serve_near_threshold() -> Inputs:
    """0.2002 in bfloat16 is 0.2002 (just above 0.2); eager compares in bfloat16."""
    return (torch.tensor([[0.1, 0.2002, 0.3, 0.4]]).to(torch.bfloat16),), {}


# -- constants sharing one storage (#186176) ---------------------------------------------------------


class Views(torch.nn.Module):
    """Two small weights that are views of one large tensor (as after RNN.flatten_parameters())."""

    def __init__(self) -> None:
        super().__init__()
        big = torch.randn(256, 1024)
        self.a = torch.nn.Parameter(big[:2])
        self.b = torch.nn.Parameter(big[2:4])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.a.t() + x @ self.b.t()


def shared_storage() -> Any:
    torch.manual_seed(29)
    return Views().eval(), (torch.randn(4, 1024),)


def serve_views() -> Inputs:
    torch.manual_seed(30)
    return (torch.randn(4, 1024),), {}


# -- buffers mutated in forward (#165444, #120424, #169118) ------------------------------------------


class Counter(torch.nn.Module):
    """A one-element counter and a larger buffer, both updated in place on every call."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.ones(1))
        self.register_buffer("scale", torch.arange(8, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1.0)
        self.scale.mul_(2.0)
        return x * self.scale + self.count


def counter() -> Any:
    return Counter(), (torch.ones(4, 8),)


def serve_ones() -> Inputs:
    return (torch.ones(4, 8),), {}


# -- non-contiguous input into an attention layer (#196251) -----------------------------------------


def encoder() -> Any:
    torch.manual_seed(31)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True, dropout=0.0)
    return layer.eval(), (torch.randn(1, 6, 16),)


def serve_permuted() -> Inputs:
    """conv1d -> permute(0, 2, 1): the right shape [1, 6, 16], channels-first memory."""
    torch.manual_seed(32)
    return (torch.randn(1, 16, 6).permute(0, 2, 1),), {}


# -- sizes Inductor could specialise on (#143667) ----------------------------------------------------


class Full(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.full((x.shape[0], 1), 3.0)


def full_of_size() -> Any:
    torch.manual_seed(33)
    return BuildSpec(Full(), (torch.randn(8, 4),), {}, {"x": {0: Dim("rows", min=2, max=64)}}, name="full_of_size")


def serve_rows_13() -> Inputs:
    torch.manual_seed(34)
    return (torch.randn(13, 4),), {}


# -- a size derived from another input's (#137748) ---------------------------------------------------


class Twice(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.repeat(2) + y


def derived_twice() -> Any:
    torch.manual_seed(35)
    n = Dim("n", min=2, max=64)
    return BuildSpec(Twice(), (torch.randn(5), torch.randn(10)), {}, {"x": {0: n}, "y": {0: 2 * n}}, name="derived_twice")


def serve_y_odd() -> Inputs:
    """y of 11 for x of 5 (not 2 * 5)."""
    torch.manual_seed(36)
    return (torch.randn(5), torch.randn(11)), {}


# -- an example at the low end of its range (#176349) ------------------------------------------------


class Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x).tanh()


def example_at_min() -> Any:
    torch.manual_seed(37)
    return BuildSpec(Affine().eval(), (torch.randn(4, 8),), {}, {"x": {0: Dim("batch", min=4, max=64)}}, name="example_at_min")


def serve_batch_9() -> Inputs:
    torch.manual_seed(38)
    return (torch.randn(9, 8),), {}


# -- a declared-dynamic dim the code pins to a constant (#121038, #134137) ---------------------------


class Pinned(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(8, 2, -1).sum(1)


def pinned_batch() -> Any:
    torch.manual_seed(39)
    return BuildSpec(Pinned(), (torch.randn(16, 4),), {}, {"x": {0: Dim("batch", min=2, max=64)}}, name="pinned_batch")


def serve_batch_32() -> Inputs:
    torch.manual_seed(40)
    return (torch.randn(32, 4),), {}


# -- a Python number as an output (#139797) -----------------------------------------------------------


class RowsOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        return x * 3.0, x.shape[0]


def scalar_output() -> Any:
    torch.manual_seed(41)
    return RowsOut(), (torch.randn(4, 4),)


def serve_rows_4x4() -> Inputs:
    torch.manual_seed(42)
    return (torch.randn(4, 4),), {}


# -- an ISA beyond the fleet's (#121516) -------------------------------------------------------------
# (the static model built with --cpu-isa x86-64-v4: cases.py)


# -- a CUDA package (tests/data/cuda_example.pt2: x float32 [batch, 16], mask bool [batch, 32]) -----


def serve_cuda_example() -> Inputs:
    """The CUDA package's inputs on the CPU: what a host without a GPU hands it."""
    torch.manual_seed(44)
    return (torch.randn(4, 16), torch.ones(4, 32, dtype=torch.bool)), {}


# -- threads: a model whose native call dominates a call (#134946, #148937, #144459, #154094) -------


class MatmulChain(torch.nn.Module):
    """Four 384x384 linears on 64 rows (~75 MFLOP a call): the native run, which one runner
    serialises, is most of a call, so two callers on one runner cannot overlap much of it (on the
    integration tests' tiny static model Python's share of a call overlapped, and two callers
    could read as scaling on a loaded host)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(384, 384) for _ in range(4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def matmul_chain() -> Any:
    torch.manual_seed(47)
    return MatmulChain().eval(), (torch.randn(64, 384),)


def serve_matmul_chain() -> Inputs:
    torch.manual_seed(48)
    return (torch.randn(64, 384),), {}


# -- CUDA packages built on the GPU machine by the gpu cases themselves (#136369, #152087, #152130) --
# (tests/data/cuda_example.pt2 cannot serve them: its kernel paths were blanked when it was
# committed, so it fails on every GPU with "CUDA driver error: file not found": GPU run 34)


class TwoLayer(torch.nn.Module):
    """#136369's shape: linear, relu, linear, sigmoid (a cuBLAS call and Triton kernels)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


def cuda_mlp() -> Any:
    torch.manual_seed(45)
    model = TwoLayer().eval().to("cuda:0")
    return BuildSpec(model, (torch.randn(8, 16, device="cuda:0"),), {}, {"x": {0: Dim("batch", min=1, max=64)}}, name="cuda_mlp")


def serve_cuda_mlp() -> Inputs:
    """Five rows on the CPU: the child moves them to the case's device."""
    torch.manual_seed(46)
    return (torch.randn(5, 16),), {}


class ToSecondGpu(torch.nn.Module):
    """#152130: the graph itself moves its result to cuda:1."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2.0 + 1.0).to("cuda:1")


def cross_gpu() -> Any:
    return BuildSpec(ToSecondGpu(), (torch.randn(8, 16, device="cuda:0"),), {}, {"x": {0: Dim("batch", min=1, max=64)}}, name="cross_gpu")
