"""A model left in training mode, found at resolve, before anything exports or compiles.

``torch.nn.Module`` starts in training mode and transformers' ``from_config`` leaves it there:
Dropout then draws noise, BatchNorm normalises with the batch's statistics, and attention applies
``dropout_p`` inside SDPA. Read off the graph after export, that shows up as random ops whose first
hint is "draw the noise outside the model", and the build compiles and validates on to six errors
(issue 44). The module tree answers it in microseconds: which modules in training mode behave
differently there. ``model.eval()`` is the fix, and it is the first and only thing the build says.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DROPOUT_ATTRIBUTES", "message", "training_dependent"]

# float attributes through which library modules apply dropout themselves (transformers'
# attention classes: ``attention_dropout``; timm: ``attn_drop`` modules are nn.Dropout already)
DROPOUT_ATTRIBUTES = ("attention_dropout", "dropout_p", "attn_dropout", "dropout", "dropout_rate", "drop_rate")
_LISTED = 5  # modules named in the message


def training_dependent(model: Any) -> list[str]:
    """The modules in training mode whose forward differs from eval mode's, each as
    ``name (Type, why)``; empty when eval mode would compute the same, or for a non-module."""
    import torch

    if not isinstance(model, torch.nn.Module) or not model.training:
        return []
    out = []
    for name, module in model.named_modules():
        if not module.training:
            continue
        label = name or "the model"
        kind = type(module).__name__
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0:
            out.append(f"{label} ({kind}, p={module.p})")
        elif isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            out.append(f"{label} ({kind}: batch statistics)")
        else:
            for attr in DROPOUT_ATTRIBUTES:
                value = getattr(module, attr, None)
                if isinstance(value, float) and not isinstance(value, bool) and value > 0:
                    out.append(f"{label} ({kind}.{attr}={value})")
                    break
    return out


def message(modules: list[str]) -> str:
    shown = ", ".join(modules[:_LISTED]) + (f" and {len(modules) - _LISTED} more" if len(modules) > _LISTED else "")
    return f"the model is in training mode: {len(modules)} module(s) behave differently there ({shown})"
