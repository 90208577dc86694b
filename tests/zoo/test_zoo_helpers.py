"""The zoo's own helpers.

- zoo.bare's two loaders: torch's ``aoti_load_package`` and the C++ loader it wraps
  (``--bare-loader direct``, for the lent GPU image where the former spends 87-105 s per load).
  Both must give the same callable: the bare path's comparison with eager must not depend on
  which one ran.
- The sequence dims of the text models on CUDA (zoo.models._seq_dim).
"""

from __future__ import annotations

import os

import pytest
import torch

from aoti_guard.spec import BuildSpec
from zoo import bare

pytestmark = [pytest.mark.integration]


class _TwoOutputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> dict[str, torch.Tensor]:
        y = self.lin(x)
        return {"y": y, "scaled": y * scale}


def test_direct_and_torch_loaders_run_the_bare_package_alike(tmp_path: os.PathLike[str]) -> None:
    torch.manual_seed(0)
    spec = BuildSpec(_TwoOutputs().eval(), (torch.randn(3, 8),), {"scale": torch.randn(3, 4)}, None, "two_outputs")
    result = bare.bare_build(spec, os.path.join(tmp_path, "two.pt2"), loader="direct")
    assert result["ok"], result.get("error")
    assert result["loader"] == "direct"
    assert result["compare"]["same_structure"] and result["compare"]["max_abs_err"] < 1e-5

    path = os.path.join(tmp_path, "two.pt2")
    x, scale = torch.randn(3, 8), torch.randn(3, 4)
    direct = bare._load(path, "direct")(x, scale=scale)
    through_torch = bare._load(path, "torch")(x, scale=scale)
    assert set(direct) == set(through_torch) == {"y", "scaled"}
    for key in direct:
        assert torch.equal(direct[key], through_torch[key])
    with pytest.raises(ValueError, match="unknown bare loader"):
        bare._load(path, "fast")


def test_the_loader_comes_from_the_environment_the_runner_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(bare, "_load", lambda path, loader: calls.append(loader) or (lambda *a, **k: None))
    monkeypatch.setenv(bare.LOADER_ENV, "direct")
    spec = BuildSpec(torch.nn.Identity(), (torch.randn(2),), {}, None, "identity")
    # the compile is not needed to see which loader is asked for: stop there
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", lambda ep, package_path: package_path)
    monkeypatch.setattr(bare.os.path, "getsize", lambda p: 0)
    result = bare.bare_build(spec, "unused.pt2")
    assert calls == ["direct"] and result["loader"] == "direct"


def test_sequence_dims_follow_exports_suggestion_on_cuda() -> None:
    """On CUDA, export refused seq 1..512 and suggested seq = 8*_seq (the zoo's GPU run): the zoo's
    text models take that suggestion there, and keep 1..S on CPU."""
    from zoo import models

    cpu = models._seq_dim("seq", 512, "cpu")
    assert (cpu.__name__, cpu.min, cpu.max) == ("seq", 1, 512)
    cuda = models._seq_dim("seq", 512, "cuda:0")
    root = cuda.root  # a derived Dim: 8 * seq8
    assert (root.__name__, root.min, root.max) == ("seq8", 1, 64)
    assert cuda.fn(3) == 24
    assert models._seq_example(77, "cuda") == 72 and models._seq_example(77, "cpu") == 77
    assert models._seq_example(4, "cuda") == 8


def test_build_args_reach_the_build_command_line(tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """zoo.parity --build-arg: how the GPU A/B of --twin-schedule is run (docs/zoo.md)."""
    from zoo import parity

    seen: list[list[str]] = []
    monkeypatch.setattr(parity, "_run", lambda cmd, env, timeout, log: seen.append(list(cmd)) or (1, 0.1, "no report"))
    parity.build_step("resnet18", "small", "cuda", str(tmp_path), 10, ["--twin-schedule", "concurrent"])
    assert seen and seen[0][-4:] == ["--device", "cuda", "--twin-schedule", "concurrent"]
    assert seen[0][3:5] == ["build", "zoo/models.py:resnet18"]


def _frames(samples: int, kernels: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, bool]:
    """The feature encoder's frame count for ``samples``, and whether every conv divided exactly."""
    length, exact = samples, True
    for k, s in zip(kernels, strides, strict=True):
        exact = exact and (length - k) % s == 0
        length = (length - k) // s + 1
    return length, exact


@pytest.mark.parametrize(
    ("kernels", "strides"),
    [((10, 3, 3, 3, 3, 2, 2), (5, 2, 2, 2, 2, 2, 2)), ((10, 3, 3), (5, 2, 2))],  # the default config, the zoo's small one
)
def test_wav2vec2_audio_lengths_on_cuda_give_frames_in_eights(kernels: tuple[int, ...], strides: tuple[int, ...]) -> None:
    """On CUDA export refused a free ``samples`` (the GPU zoo run): the zoo gives wav2vec2 lengths
    whose frame count is 8*k, with every conv's division exact, within 1 s..20 s."""
    from types import SimpleNamespace

    from zoo import models

    cfg = SimpleNamespace(conv_kernel=kernels, conv_stride=strides)
    dim, example = models._frames_of_8(cfg, 16000, 320000)
    root = dim.root
    assert root.__name__ == "frames8"
    assert example == dim.fn(root.min) and 16000 <= example
    assert dim.fn(root.max) <= 320000 < dim.fn(root.max + 1)
    assert dim.fn(root.min - 1) < 16000
    for k in (root.min, root.min + 1, (root.min + root.max) // 2, root.max):
        frames, exact = _frames(dim.fn(k), kernels, strides)
        assert frames == 8 * k and exact, (k, frames)
