"""A tiny transformers decoder as real checkpoints come (build TARGETs for test_zoo_checkpoints.py):
Qwen2 with tied embeddings (``lm_head.weight`` is ``model.embed_tokens.weight``) and a rotary
``inv_freq``, a non-persistent buffer. One head of 32 keeps ``inv_freq`` at 16 values, so it stays a
runtime constant (Inductor inlines 1-D constants of 8 or fewer). Random weights, seeded; nothing is
downloaded. Batch and sequence are static: the compile stays short."""

from __future__ import annotations

import os
from typing import Any

import torch

from aoti_guard import BuildSpec

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def model() -> Any:
    from zoo.models import ensure_torchvision_importable

    ensure_torchvision_importable()  # transformers imports torchvision when it is installed
    import transformers

    config = transformers.Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        use_cache=False,
    )
    torch.manual_seed(0)
    return transformers.Qwen2ForCausalLM(config).eval()


def example_ids() -> torch.Tensor:
    return torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))


def qwen2_tied() -> BuildSpec:
    return BuildSpec(model(), (), {"input_ids": example_ids()}, None, name="qwen2_tied")
