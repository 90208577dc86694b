"""``probe --shapes``: the child makes the resized inputs with the golden samples' generator
(runtime_probe/golden/recipe.py), and falls back to the example's values resampled where the
generator cannot make them (no contract, a request it refuses): never a crash."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from runtime_probe.child import ops
from runtime_probe.golden import recipe as _recipe
from runtime_probe.package.manifest import InputSpec, TensorSpec

SPECS = [
    InputSpec("ids", "ids", "tensor", 0, TensorSpec("int64", (4, 8), (8, 1), True, "cpu", value_range=(0, 99))),
    InputSpec("attention_mask", "attention_mask", "tensor", 1, TensorSpec("int64", (4, 8), (8, 1), True, "cpu")),
]
VALUES = {"ids": torch.full((4, 8), 7), "attention_mask": torch.ones(4, 8, dtype=torch.int64)}  # the sample's inputs
RESIZE = {"ids": [6, 10], "attention_mask": [6, 10]}
MANIFEST = SimpleNamespace(io=SimpleNamespace(inputs=SPECS))  # what _resized reads of a manifest


def test_resized_inputs_come_from_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "_read_manifest", lambda package: MANIFEST)
    made = ops._resized(VALUES, RESIZE, "pkg.pt2")
    ids, mask = made["ids"], made["attention_mask"]
    assert tuple(ids.shape) == (6, 10) and tuple(mask.shape) == (6, 10)
    # ids across the table, both ends present; the example held only 7
    assert int(ids.min()) == 0 and int(ids.max()) == 99
    # rows padded on the right, on the left, and not at all
    assert mask[0, 0] == 1 and mask[0, -1] == 0 and mask[1, 0] == 0 and mask[1, -1] == 1 and bool((mask[2] == 1).all())


def test_without_a_contract_the_example_is_resampled() -> None:
    made = ops._resized(VALUES, RESIZE, None)
    assert bool((made["ids"] == 7).all()) and bool((made["attention_mask"] == 1).all())


def test_a_request_the_generator_refuses_falls_back_to_resampling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise _recipe.RecipeError("over the byte cap")

    monkeypatch.setattr(ops, "_read_manifest", lambda package: MANIFEST)
    monkeypatch.setattr(_recipe, "generate", refuse)
    made = ops._resized(VALUES, RESIZE, "pkg.pt2")
    assert tuple(made["ids"].shape) == (6, 10) and bool((made["ids"] == 7).all())


def test_lying_inputs_never_crash_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """A golden file whose "mask" is not 0/1 and a manifest whose ids range is upside down (both
    an attacker's to write): the mask's values are drawn from the example's, the ids resampled."""
    lying = [
        InputSpec("ids", "ids", "tensor", 0, TensorSpec("int64", (4, 8), (8, 1), True, "cpu", value_range=(99, 0))),
        SPECS[1],
    ]
    monkeypatch.setattr(ops, "_read_manifest", lambda package: SimpleNamespace(io=SimpleNamespace(inputs=lying)))
    values = {"ids": torch.full((4, 8), 7), "attention_mask": torch.tensor([[0, 1, 5, 1]] * 4).repeat(1, 2)}
    made = ops._resized(values, RESIZE, "pkg.pt2")
    assert tuple(made["attention_mask"].shape) == (6, 10) and set(made["attention_mask"].unique().tolist()) <= {0, 1, 5}
    assert bool((made["ids"] == 7).all())
