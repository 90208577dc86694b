"""The build's eager run and export each get their own copy of the example inputs.

A Hugging Face ``DynamicCache`` is extended in place by every eager forward; before the fix the
build's eager run grew the cache, and export then traced a past of 13 against a mask of 12 + 1
(``gpt2_cache``: ``Expected input L['attention_mask'].size()[1] to be equal to past + 1``).
"""

from __future__ import annotations

import torch
from torch.export import Dim

from aoti_guard import BuildSpec
from aoti_guard.builder.export.program import eager_run, export_program, fresh_inputs
from aoti_guard.builder.resolve.binding import bind


class GrowsItsCache(torch.nn.Module):
    """Appends to a list input, like a DynamicCache forward; the mask must be one longer."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor, cache: list[torch.Tensor]) -> torch.Tensor:
        torch._check(mask.shape[1] == cache[0].shape[1] + 1)
        cache.append(x)
        return x.sum() + mask.sum() + cache[0].sum()


def _spec() -> BuildSpec:
    past = Dim("past", min=1, max=32)
    return BuildSpec(
        GrowsItsCache(),
        (torch.ones(2, 1), torch.ones(2, 5), [torch.ones(2, 4)]),
        dynamic_shapes=({0: None}, {1: past + 1}, [{1: past}]),
    )


def test_the_eager_run_leaves_the_examples_as_they_were() -> None:
    spec = _spec()
    eager_run(spec.model, spec)
    eager_run(spec.model, spec)
    assert len(spec.args[2]) == 1


def test_export_after_the_eager_run_sees_the_original_examples() -> None:
    spec = _spec()
    eager_run(spec.model, spec)
    ep = export_program(spec, spec.dynamic_shapes, bind(spec.model, spec.args, spec.kwargs))
    args, _ = ep.example_inputs
    assert len(spec.args[2]) == 1
    assert len(args[2]) == 1


def test_fresh_inputs_are_copies() -> None:
    spec = _spec()
    args, kwargs = fresh_inputs(spec)
    assert args[0] is not spec.args[0] and torch.equal(args[0], spec.args[0])
    assert kwargs == {}
