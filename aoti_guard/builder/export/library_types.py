"""A type torch.export cannot flatten in a model's inputs or outputs, and the hint for it (a Hugging
Face ``DynamicCache`` gets its recipe). Split from export/hints.py, which re-exports it."""

from __future__ import annotations

import re

__all__ = ["library_type_hint"]

_TYPE_FOUND = (
    re.compile(r"Found <class '(?P<type>[\w.]+)'> in (?P<side>input|output)"),
    re.compile(r"one of the (?P<side>input|output)s with type `?<class '(?P<type>[\w.]+)'>"),
)


def library_type_hint(text: str) -> str | None:
    """The hint for a type torch.export found in the inputs or outputs and cannot flatten; None
    when the message names none. A Hugging Face ``DynamicCache`` gets its recipe (both ways
    checked with transformers 5 and torch 2.13); any other type a generic hint naming it."""
    for pattern in _TYPE_FOUND:
        m = pattern.search(text)
        if m:
            break
    else:
        return None
    typename, side = m["type"], m["side"]
    if typename.startswith("transformers.") and typename.rsplit(".", 1)[-1] == "DynamicCache":
        register = (
            "call transformers.integrations.executorch.register_dynamic_cache_export_support() in the factory before it returns "
            "(it makes DynamicCache a pytree node, which importing transformers does not)"
        )
        if side == "output":
            return (
                f"the model returns a {typename} (Hugging Face models do while use_cache is on, the default), which torch.export "
                f"cannot flatten as it comes: {register}; or build without the cache: return use_cache=False in the factory's "
                "kwargs, or set model.config.use_cache = False"
            )
        return f"the model takes a {typename}, which torch.export cannot flatten as it comes: {register}"
    return (
        f"torch.export cannot flatten the {typename} in the model's {side}s: have forward {'return' if side == 'output' else 'take'} "
        f"tensors (or tuples, lists and dicts of them), or register {typename.rsplit('.', 1)[-1]} as a pytree node "
        "(torch.utils._pytree.register_pytree_node; torch.export.register_dataclass for a dataclass)"
    )
