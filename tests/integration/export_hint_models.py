"""Model factories whose export torch.export refuses in a way its message says how to fix (and the
factories that follow the fix): tests/integration/test_export_hints.py. The multiple-of-8 case is
``models.py:groups8``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch


class PositionTable(torch.nn.Module):
    """Token embeddings plus a table of 128 positions, indexed the way BERT does (a ``position_ids``
    buffer sliced to the sequence length): a sequence range beyond 128 makes torch.export suggest
    ``seq = Dim('seq', max=128)``."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(100, 8)
        self.positions = torch.nn.Embedding(128, 8)
        self.register_buffer("position_ids", torch.arange(128).unsqueeze(0), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.tokens(ids) + self.positions(self.position_ids[:, : ids.shape[1]])


def position_table() -> Any:
    torch.manual_seed(11)
    return PositionTable().eval(), (torch.randint(0, 100, (2, 16)),)


class Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(x))


def batch_of_one() -> Any:
    """An example batch of 1: torch.export specializes it ("specialized it to be a constant (1)")."""
    torch.manual_seed(12)
    return Affine().eval(), (torch.randn(1, 4),)


def batch_of_two() -> Any:
    """The same model with the example the hint asks for: a batch of 2."""
    torch.manual_seed(12)
    return Affine().eval(), (torch.randn(2, 4),)


def _import_transformers() -> None:
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:  # the repo's zoo/ is not installed: the build's working directory may be anywhere
        sys.path.insert(0, repo)
    from zoo.models import ensure_torchvision_importable

    ensure_torchvision_importable()  # transformers imports torchvision, whose CUDA wheel breaks beside a CPU torch


def _tiny_llama() -> Any:
    _import_transformers()
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        attn_implementation="eager",  # this test is about the cache in the output, not about attention kernels
    )
    torch.manual_seed(13)
    return transformers.LlamaForCausalLM(config).eval()


def llama_as_it_comes() -> Any:
    """A tiny Hugging Face decoder exported as it comes: use_cache at its default, so its output
    holds a DynamicCache."""
    return _tiny_llama(), (torch.randint(0, 64, (2, 8)),)


def llama_without_cache() -> Any:
    """The same decoder with the hint's fix: use_cache=False in the factory's kwargs."""
    return _tiny_llama(), (torch.randint(0, 64, (2, 8)),), {"use_cache": False}


class MaskedTokens(torch.nn.Module):
    """Token embeddings times a padding mask: ``input_ids`` and ``attention_mask`` meet in one op,
    so a mask left static pins both declared dims of the ids to its sizes (issue 44, item 3)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(64, 8)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.tokens(input_ids) * attention_mask.unsqueeze(-1).to(torch.float32)


def _masked(batch: int, seq: int) -> Any:
    torch.manual_seed(14)
    ids = torch.randint(0, 64, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[-1, seq // 2 :] = 0
    return MaskedTokens().eval(), (ids, mask)


def masked_tokens() -> Any:
    """The example the team gave: a batch of 2, 16 tokens."""
    return _masked(2, 16)


def masked_tokens_inside() -> Any:
    """The example the hint asks for when 2 x 16 lies outside batch 4..8, seq 1..8."""
    return _masked(4, 8)


def _tiny_mistral(max_positions: int) -> Any:
    _import_transformers()
    import transformers

    config = transformers.MistralConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=max_positions,
        use_cache=False,
    )
    torch.manual_seed(15)
    return transformers.MistralForCausalLM(config).eval()


def mistral_64_positions() -> Any:
    """A tiny Mistral (rotary positions) made for 64 positions, with ``input_ids`` and a padding
    ``attention_mask`` of 2 x 16 (issue 44, items 3 and 13)."""
    ids = torch.randint(3, 64, (2, 16), generator=torch.Generator().manual_seed(16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[-1, 8:] = 0
    return _tiny_mistral(64), (), {"input_ids": ids, "attention_mask": mask}
