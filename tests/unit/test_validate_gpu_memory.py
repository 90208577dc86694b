"""The build hands back the GPU memory its eager and float64 runs cached before the validation
child runs the compiled model (aoti_guard/builder/validate/run.py, ``free_cached_gpu_memory``)."""

from __future__ import annotations

import pytest
import torch

from aoti_guard.builder.validate import run


@pytest.mark.parametrize(
    ("device", "initialized", "freed"), [("cuda", True, True), ("cuda:1", True, True), ("cuda", False, False), ("cpu", True, False)]
)
def test_cached_gpu_memory_is_freed_only_on_an_initialized_gpu(
    monkeypatch: pytest.MonkeyPatch, device: str, initialized: bool, freed: bool
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    run.free_cached_gpu_memory(device)
    assert calls == (["empty_cache"] if freed else [])
