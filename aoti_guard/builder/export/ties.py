"""Which input the user left static holds a declared dimension in place.

torch.export says "You marked seq as dynamic but your code specialized it to be a constant (16)"
when ``input_ids:1`` is declared and ``attention_mask:1``, left static, meets it in an op
(``input_ids * attention_mask``, a mask broadcast against the scores): the static size pins the
symbol. Its message names neither the mask nor the op, and "make input_ids:1 static" is the wrong
fix (issue 44: a Mistral decoder with its mask left static).

``find_ties`` asks torch itself: it exports once more with every dimension the user did not
declare left free (``Dim.AUTO``), and reads the program's input sizes (the I/O contract's reading,
export/contract.py): a free dimension that came out as ``seq`` is tied to it by the model's code. One
derived from it (``seq + 1``) torch refuses to leave free, and its refusal states the relation
among its suggested fixes (``L['labels'].size()[1] = seq + 1``): read there. One more export, and
only after a refusal of that kind.

A dimension that stays a free size of its own, in an input tied that way, with a declared symbol's
example size, is named too, as not proven: a padding mask's batch, which Hugging Face decoders
index (``mask[batch_idx, kv_idx]``) rather than broadcast, so no guard ties it to the ids' batch and
the build passes with the mask's batch fixed at the example's (and every other batch fails).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from aoti_guard.builder.export.hints import Declared, Tie, suggested_fixes
from aoti_guard.builder.resolve.binding import Binding

__all__ = ["find_ties"]

_LINEAR = re.compile(r"^(?:(?P<mul>\d+)\*)?(?P<root>[A-Za-z_]\w*)(?:\+(?P<add>\d+))?$")


def find_ties(
    model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], dynamic: Any, declared: Sequence[Declared], binding: Binding
) -> tuple[Tie, ...]:
    """The undeclared input dims tied to the declared symbols (``Tie``); empty where the second
    export fails or finds none. ``args``/``kwargs``: a fresh copy of the example inputs (the export
    may change them in place); ``binding``: the example bound to ``model``'s signature."""
    import torch

    from aoti_guard.builder.export.contract import extract_contract

    if not declared:
        return ()
    names = {d.name for d in declared}
    bound = binding.values(args, kwargs)
    try:
        free = _undeclared_free(dynamic, bound)
    except Exception:  # noqa: BLE001 - a diagnosis only: the refusal's own hint stands without it
        return ()
    try:
        ep = torch.export.export(model, tuple(args), dict(kwargs), dynamic_shapes=free)
        contract = extract_contract(ep, args, kwargs, binding, dynamic_shapes=free)
    except Exception as exc:  # noqa: BLE001 - a diagnosis only: the refusal's own hint stands without it
        return _ties_in_refusal(str(exc), names, bound)
    at = {(d.input, d.dim) for d in declared}
    root_example = {d.name: d.example for d in declared if (d.mul, d.add) == (1, 0) and d.example is not None}
    proven: list[Tie] = []
    loose: list[tuple[str, int, int]] = []  # free sizes of their own: (input, dim, example size)
    for spec in contract.inputs:
        if spec.tensor is None:
            continue
        example = bound.get(spec.name)
        for dim, size in enumerate(spec.tensor.shape):
            if (spec.name, dim) in at or isinstance(size, int):
                continue
            m = _LINEAR.match(size.expr.replace(" ", ""))
            n = int(example.shape[dim]) if isinstance(example, torch.Tensor) else None
            if m is not None and m["root"] in names:
                proven.append(Tie(spec.name, dim, m["root"], int(m["mul"] or 1), int(m["add"] or 0), n, True))
            elif m is not None and m["mul"] is None and m["add"] is None and n is not None:
                loose.append((spec.name, dim, n))
    tied_inputs = {t.input for t in proven}
    companions = []
    for name, dim, n in loose:
        same = [root for root, size in root_example.items() if size == n]
        if name in tied_inputs and len(same) == 1 and n not in (0, 1):
            companions.append(Tie(name, dim, same[0], example=n, proven=False))
    return (*proven, *companions)


_FREED = re.compile(r"\[['\"](?P<input>[A-Za-z_]\w*)['\"]\]\.size\(\)\[(?P<dim>\d+)\]\s*=\s*(?P<rhs>.+)$")


def _ties_in_refusal(text: str, names: set[str], bound: Mapping[str, Any]) -> tuple[Tie, ...]:
    """The ties torch states when it refuses the free dims: it takes a free dim equal to a declared
    one, but refuses one derived from it (``L['labels'].size()[1] = seq + 1`` among its suggested
    fixes)."""
    import torch

    ties = []
    for line in suggested_fixes(text):
        m = _FREED.search(line)
        rhs = _LINEAR.match(m["rhs"].replace(" ", "")) if m is not None else None
        value = bound.get(m["input"]) if m is not None else None
        if m is None or rhs is None or rhs["root"] not in names or not isinstance(value, torch.Tensor):
            continue
        dim = int(m["dim"])
        example = int(value.shape[dim]) if dim < value.dim() else None
        ties.append(Tie(m["input"], dim, rhs["root"], int(rhs["mul"] or 1), int(rhs["add"] or 0), example))
    return tuple(ties)


def _undeclared_free(dynamic: Any, bound: Mapping[str, Any]) -> dict[str, Any]:
    """``dynamic`` by parameter name, with every top-level tensor dim it leaves static made
    ``Dim.AUTO`` (torch keeps it free unless the code ties or fixes it)."""
    import torch
    from torch.export import Dim

    if isinstance(dynamic, Mapping):
        given = dict(dynamic)
    elif isinstance(dynamic, (tuple, list)):
        given = dict(zip(bound, dynamic))
    else:
        given = {}
    out: dict[str, Any] = {}
    for name, value in bound.items():
        spec = given.get(name)
        if not isinstance(value, torch.Tensor):
            out[name] = spec
            continue
        if isinstance(spec, Mapping):
            per_dim = {int(k): v for k, v in spec.items() if isinstance(k, int)}
        elif isinstance(spec, (tuple, list)):
            per_dim = dict(enumerate(spec))
        else:
            per_dim = {}
        rank = value.dim()
        kept = {k if k >= 0 else rank + k: v for k, v in per_dim.items() if v is not None}
        out[name] = {i: kept.get(i, Dim.AUTO) for i in range(rank)}
    return out
