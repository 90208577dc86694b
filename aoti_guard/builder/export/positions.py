"""A sequence range past the positions the model's config says it was made for.

A transformers config names the longest sequence the model was made for,
``max_position_embeddings``. A rotary-position decoder (Llama, Mistral, Qwen) computes its angles
for any position, so torch.export, the compile and validation all pass a range past it, and the
build said nothing (issue 44: a Mistral built for 1..1024 against 256); its outputs there come
from positions it never saw in training. A model with a learned position table is refused at
export instead (export/hints.py gives the range torch allows).

The sequence dimension is dim 1 of the inputs a transformers model takes per token; the attention
mask's covers the cached positions too, which is what counts.
"""

from __future__ import annotations

import re
from typing import Any

from runtime_probe.package.manifest import IOContract
from runtime_probe.reporting.findings import Finding, warning

__all__ = ["SEQUENCE_INPUTS", "beyond_positions"]

SEQUENCE_INPUTS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    "inputs_embeds",
    "token_type_ids",
    "decoder_input_ids",
    "decoder_attention_mask",
)


def beyond_positions(model: Any, contract: IOContract) -> list[Finding]:
    """A warning when a sequence dimension of the contract may exceed the model's
    ``config.max_position_embeddings``; none for a model without that config value."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return []
    over: list[tuple[str, Any, int | None]] = []  # (where, the size, its largest value; None: no maximum)
    for spec in contract.inputs:
        shape = spec.tensor.shape if spec.tensor is not None else ()
        if spec.name not in SEQUENCE_INPUTS or len(shape) < 2:
            continue
        size = shape[1]
        largest = size if isinstance(size, int) else size.max
        if largest is None or largest > limit:
            over.append((f"{spec.name}:1", size, largest))
    if not over:
        return []
    where, size, largest = max(over, key=lambda o: float("inf") if o[2] is None else o[2])
    said = "with no maximum" if largest is None else f"up to {largest}"
    symbol = None if isinstance(size, int) else size.expr
    narrow = (
        f"narrow the range to at most {limit} (--dynamic {where}={symbol}:{size.min}..{limit})"
        if symbol is not None and re.fullmatch(r"[A-Za-z_]\w*", symbol)
        else f"narrow the range so that {where} stays at most {limit}"
    )
    return [
        warning(
            "build.positions_exceeded",
            "export",
            f"the package accepts sequences {said} ({where}), past the {limit} positions the model's config says it was made for "
            "(config.max_position_embeddings)",
            expected=f"{where} at most {limit}",
            found=f"{where} {said}",
            hint=f"{narrow}; or, if the model was trained for longer sequences, set config.max_position_embeddings (and its rope "
            "scaling) to match before building. Positions past it run without error on a rotary-position model, but it never "
            "saw them in training",
            evidence={"max_position_embeddings": limit, "input": where, "largest": largest},
        )
    ]
