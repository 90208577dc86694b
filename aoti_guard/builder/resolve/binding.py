"""The example bound to the model's signature once, at the resolve step: ``bind`` and ``Binding``.

``bind`` reads ``forward``'s parameters; every later reader (the ``--dynamic`` dims, the
contract's input names, the export hint's declared dims, the tie search) takes the ``Binding`` it
made instead of reading the signature again.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime_probe.package.manifest import ParamSpec

__all__ = ["Binding", "bind"]

_KIND_NAMES = {
    inspect.Parameter.POSITIONAL_ONLY: "positional_only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional_or_keyword",
    inspect.Parameter.KEYWORD_ONLY: "keyword_only",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}


@dataclass(frozen=True)
class Binding:
    """How the example's arguments bind to ``forward``: each parameter, its kind, and how the
    example passes it (positional, keyword, omitted)."""

    params: tuple[ParamSpec, ...]

    def values(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The example inputs (or a fresh copy of them) by parameter name, as ``forward`` binds them."""
        positional = [p.name for p in self.params if p.kind in ("positional_only", "positional_or_keyword")]
        return dict(zip(positional, args)) | dict(kwargs)


def bind(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Binding:
    """Bind the example to ``model.forward`` (an ExportedProgram: its module's). Where the signature
    cannot be read (a builtin), the arguments are named by position (``arg0``...) and keyword."""
    import torch

    target = model.module() if isinstance(model, torch.export.ExportedProgram) else model
    return Binding(tuple(_params(_signature(target), args, kwargs)))


def _signature(model: Any) -> inspect.Signature | None:
    try:
        forward = model.forward if hasattr(model, "forward") else model
        return inspect.signature(forward)
    except (TypeError, ValueError):
        return None


def _params(sig: inspect.Signature | None, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[ParamSpec]:
    if sig is None:
        return [ParamSpec(f"arg{i}", "positional_only", "positional") for i in range(len(args))] + [
            ParamSpec(k, "keyword_only", "keyword") for k in kwargs
        ]
    out = []
    positional_seen = 0
    extra_kwargs = set(kwargs)
    for p in sig.parameters.values():
        kind = _KIND_NAMES[p.kind]
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            passed = "positional" if positional_seen < len(args) else "omitted"
            positional_seen = len(args)
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            passed = "keyword" if extra_kwargs else "omitted"
        elif p.kind is not inspect.Parameter.KEYWORD_ONLY and positional_seen < len(args):
            passed = "positional"
            positional_seen += 1
        elif p.name in kwargs:
            passed = "keyword"
            extra_kwargs.discard(p.name)
        else:
            passed = "omitted"
        out.append(ParamSpec(p.name, kind, passed))
    return out
