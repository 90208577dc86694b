"""What hashing the program's constants while the release model compiles saves the package phase
(``aoti_guard/builder/constant_digests.py``, ``ConstantDigests``): ``--mb`` MB of weights in
``--tensors`` tensors, a "compile" of ``--compile-s`` seconds (a sleep: the compile's work is in
other threads and processes), then the package phase's constant digests (``extract_constants``),
serial (all of them in the package phase, as before) against early (the thread started before the
compile), interleaved, side by side.

    python -m bench.early_constant_digests [--mb 1024] [--tensors 200] [--compile-s 5] [--rounds 3]

It measures the mechanism on this host's CPU, not a GPU build: on the H100 the same digests were
most of the package phase (docs/gpu-validation.md, run 19: llama 9.8 s, deberta_v2 12.3 s), each
with a copy from the device first.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from aoti_guard.builder.constant_digests import ConstantDigests
from aoti_guard.builder.contract import extract_constants
from bench._common import Sample, interleave, side_by_side, timed


class _Weights(torch.nn.Module):
    def __init__(self, mb: int, tensors: int) -> None:
        super().__init__()
        per = max(1, (mb << 20) // 4 // tensors)
        self.ws = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(per), requires_grad=False) for _ in range(tensors))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.stack([w[0] for w in self.ws]).sum()


def _serial(ep: Any, compile_s: float) -> Sample:
    time.sleep(compile_s)
    return timed(lambda: extract_constants(ep, {}))


def _early(ep: Any, compile_s: float) -> Sample:
    digests = ConstantDigests({**ep.state_dict})
    time.sleep(compile_s)
    sample = timed(lambda: extract_constants(ep, {}, digest_of=digests.digest))
    assert digests.detail()["again"] == 0
    return sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.early_constant_digests", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=1024, help="the weights' size in MB (default 1024)")
    parser.add_argument("--tensors", type=int, default=200, help="how many tensors hold them (default 200)")
    parser.add_argument("--compile-s", type=float, default=5.0, help="seconds of 'compile' before the package phase (default 5)")
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args(argv)
    ep = torch.export.export(_Weights(ns.mb, ns.tensors).eval(), (torch.zeros(1),))
    arms = [
        ("serial (in the package phase)", lambda: _serial(ep, ns.compile_s)),
        ("early (during the compile)", lambda: _early(ep, ns.compile_s)),
    ]
    results = interleave(arms, ns.rounds, warmup=0)
    title = f"package phase's constant digests of {ns.mb} MB in {ns.tensors} tensors after {ns.compile_s:g} s of compile, median of {ns.rounds}:"
    print(side_by_side(title, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
