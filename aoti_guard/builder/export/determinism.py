"""Nondeterminism and state, read off the exported graph before anything is compiled.

A model left in training mode (active Dropout, BatchNorm on batch statistics), a random op in
forward (``x + torch.rand_like(x)``) or a buffer updated in place (``self.count.add_(1)``) makes
eager disagree with itself: two calls on one input give two answers. Validation then compares the
compiled model with one random draw (or one state) and eager with another, and a difference that
is the model's own gets blamed on the compiler, or worse, a float64 run (a third draw) makes the
noise look like a floor and the tolerance grows to hide it (issue: DistilBERT without ``.eval()``
stored ``atol 0.185`` and every probe passed).

Each cause is named with the module or buffer it comes from, from the graph's own nodes:
``nn_module_stack`` for the module, the graph signature for the buffer's name. Both are errors: a
package whose outputs change from call to call (or from eager's by design) cannot be validated
against golden outputs, and a model in training mode is not the model to serve.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime_probe.reporting.findings import Finding, error, warning

__all__ = ["GraphState", "RandomOp", "Repeat", "causes", "findings", "repeat", "scan"]

PHASE = "export"
# Dropout-like ops that are random only when their ``train`` argument (index 2) is true.
_TRAIN_ARG = {"dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "native_dropout"}
# BatchNorm-like ops whose ``training`` argument makes them normalize with the batch's statistics
# and update the running ones: (argument index of training, running_mean index).
_BATCH_NORM = {"batch_norm": 5, "_native_batch_norm_legit": 5, "native_batch_norm": 5, "_batch_norm_with_update": -1}


@dataclass(frozen=True)
class RandomOp:
    op: str  # "aten.rand_like.default"
    module: str  # "drop" (the module path), "" for the root
    module_type: str  # "torch.nn.modules.dropout.Dropout"
    training: bool  # random because the module is in training mode (dropout with train=True)


@dataclass(frozen=True)
class GraphState:
    """What makes one call depend on chance or on the calls before it."""

    random_ops: tuple[RandomOp, ...]
    mutated_buffers: tuple[str, ...]  # FQNs, in graph order
    batch_norm_training: tuple[str, ...]  # BatchNorm modules normalizing with batch statistics
    training_modules: tuple[str, ...]  # modules in training mode whose ops above make it matter

    @property
    def clean(self) -> bool:
        return not (self.random_ops or self.mutated_buffers or self.batch_norm_training)


@dataclass(frozen=True)
class Repeat:
    """Two eager calls on the example inputs, compared leaf by leaf, bit for bit (NaN equals NaN)."""

    differs: bool
    max_abs: float  # the largest |first - second| over the float leaves (inf where only one is NaN)
    output: str | None  # the first leaf that differs, by its index in the output's leaves


def repeat(first: Any, second: Any) -> Repeat:
    """Whether two calls' outputs differ: the evidence ``build.nondeterministic`` states."""
    import torch
    from torch.utils import _pytree as pytree

    a, b = pytree.tree_leaves(first), pytree.tree_leaves(second)
    if len(a) != len(b):
        return Repeat(True, math.inf, None)
    worst, where = 0.0, None
    for i, (x, y) in enumerate(zip(a, b)):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            if x != y and where is None:
                worst, where = math.inf, f"leaf {i}"
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return Repeat(True, math.inf, f"leaf {i}")
        same = (x == y) | (x.isnan() & y.isnan()) if x.is_floating_point() else x == y
        if bool(same.all()):
            continue
        gap = float((x.double() - y.double()).abs().nan_to_num(math.inf).max()) if x.is_floating_point() else math.inf
        if where is None:
            where = f"leaf {i}"
        worst = max(worst, gap)
    return Repeat(where is not None, worst, where)


def _module_of(node: Any) -> tuple[str, str]:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, kind = list(stack.values())[-1]
    return str(path), kind if isinstance(kind, str) else getattr(kind, "__qualname__", str(kind))


def _op_name(target: Any) -> str:
    schema = getattr(target, "_schema", None)
    return schema.name.split("::")[-1] if schema is not None else ""


def _literal(node: Any, index: int, name: str) -> Any:
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name)


def _draws(node: Any) -> bool:
    """Whether a seeded op draws here: attention ops carry the tag for their ``dropout_p``, which
    is 0.0 in eval mode (transformers passes ``dropout_p=0.0`` unless training)."""
    args = node.target._schema.arguments
    names = [a.name for a in args]
    if "dropout_p" not in names:
        return True
    index = names.index("dropout_p")
    given = index < len(node.args) or "dropout_p" in node.kwargs
    value = _literal(node, index, "dropout_p") if given else args[index].default_value  # left out: the schema's default
    return not (isinstance(value, int | float) and value == 0)


def scan(ep: Any, model: Any = None) -> GraphState:
    """Random ops, in-place buffer updates and training-mode BatchNorm in ``ep``'s graph.

    ``model``: the eager module, when there is one, for which modules are in training mode."""
    import torch

    buffers = dict(ep.graph_signature.inputs_to_buffers)
    mutated: list[str] = list(dict.fromkeys(getattr(ep.graph_signature, "buffers_to_mutate", {}).values()))
    random_ops: list[RandomOp] = []
    batch_norm: list[str] = []
    seeded = getattr(torch.Tag, "nondeterministic_seeded", None)
    for node in ep.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        name = _op_name(node.target)
        module, kind = _module_of(node)
        if name.rstrip("_") in _TRAIN_ARG:  # dropout_ too: torchvision's in-place Dropout, train=False in eval
            if _literal(node, 2, "train") is True:
                random_ops.append(RandomOp(str(node.target), module, kind, training=True))
        elif seeded is not None and seeded in node.target.tags and _draws(node):
            random_ops.append(RandomOp(str(node.target), module, kind, training=False))
        if name in _BATCH_NORM and _BATCH_NORM[name] >= 0 and _literal(node, _BATCH_NORM[name], "training") is True:
            batch_norm.append(module or kind)
        elif name == "_batch_norm_with_update":
            batch_norm.append(module or kind)
        # an argument the op writes (``self`` of add_, ``running_mean`` of the legit batch norm)
        for arg_schema, arg in zip(node.target._schema.arguments, node.args):
            alias = arg_schema.alias_info
            if alias is not None and alias.is_write and isinstance(arg, torch.fx.Node) and arg.name in buffers:
                fqn = buffers[arg.name]
                if fqn not in mutated:
                    mutated.append(fqn)
    training = _training_modules(model, [r.module for r in random_ops if r.training] + batch_norm)
    return GraphState(tuple(random_ops), tuple(mutated), tuple(dict.fromkeys(batch_norm)), training)


def _training_modules(model: Any, involved: Iterable[str]) -> tuple[str, ...]:
    """The modules among ``involved`` that are in training mode in the eager model."""
    named: Mapping[str, Any] = {}
    try:
        named = dict(model.named_modules()) if model is not None else {}
    except (AttributeError, TypeError):
        named = {}
    out = [m for m in dict.fromkeys(involved) if m in named and getattr(named[m], "training", False)]
    return tuple(out)


def _names(items: Iterable[str], limit: int = 6) -> str:
    items = list(items)
    shown = ", ".join(f"`{i or '<root>'}`" for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _random_parts(state: GraphState) -> list[str]:
    dropout = [r.module for r in state.random_ops if r.training]
    other = [r for r in state.random_ops if not r.training]
    parts = [f"dropout active in training mode in {_names(dropout)}"] if dropout else []
    if other:
        parts.append(f"random op(s) {', '.join(dict.fromkeys(r.op for r in other))} in {_names(r.module for r in other)}")
    return parts


def _state_parts(state: GraphState) -> list[str]:
    parts = [f"buffer(s) {_names(state.mutated_buffers)} updated in place by forward"] if state.mutated_buffers else []
    if state.batch_norm_training:
        parts.append(f"BatchNorm in training mode in {_names(state.batch_norm_training)} normalizes with each batch's statistics")
    return parts


def causes(state: GraphState) -> list[str]:
    """What makes eager disagree with itself, in words (the stage bisection names them)."""
    return [*_random_parts(state), *_state_parts(state)]


def findings(state: GraphState, *, root_training: bool, repeated: Repeat | None = None) -> list[Finding]:
    """``build.nondeterministic`` for random ops, ``build.stateful_model`` for buffers updated in
    place (training-mode BatchNorm included); none for a clean graph.

    ``repeated``: two eager calls on the example compared (``repeat``). A random op is an error
    when they differ, or when they were not compared; when they were and are identical, the draw
    does not reach the outputs on that input (transformers' Wav2Vec2 draws its LayerDrop number in
    eval mode too, and uses it only in training): a warning, and the build goes on."""
    eval_hint = "call model.eval() in the factory before returning the model" if root_training else None
    out: list[Finding] = []
    if state.random_ops:
        out.append(_random_finding(state, eval_hint, repeated))
    if state.mutated_buffers or state.batch_norm_training:
        out.append(_stateful_finding(state, eval_hint))
    return out


def _random_finding(state: GraphState, eval_hint: str | None, repeated: Repeat | None) -> Finding:
    """``build.nondeterministic``: an error, or a warning when two calls on the example agree."""
    dropout = [r for r in state.random_ops if r.training]
    other = [r for r in state.random_ops if not r.training]
    parts = _random_parts(state)
    evidence = {
        "random_ops": [{"op": r.op, "module": r.module, "module_type": r.module_type, "training": r.training} for r in state.random_ops],
        "training_modules": list(state.training_modules),
    }
    if repeated is not None:
        evidence["two_calls"] = {"differ": repeated.differs, "max_abs": repeated.max_abs, "output": repeated.output}
    if repeated is not None and not repeated.differs:
        return warning(
            "build.nondeterministic",
            PHASE,
            "the model's forward draws random numbers: " + "; ".join(parts) + ", but two calls on the example gave "
            "identical outputs: the draws do not reach the outputs on that input",
            found="; ".join(parts),
            hint="if they can on other inputs, validation's comparison with eager will show it; draws that never "
            "matter are best removed (or made only in training mode)",
            evidence=evidence,
        )
    hint = (
        (eval_hint + " (Dropout is active in training mode)" if dropout and eval_hint else "")
        + ("; " if dropout and eval_hint and other else "")
        + (
            "a random op in forward makes every call differ: the package cannot be validated against golden outputs; "
            "draw the noise outside the model (pass it as an input) or remove it"
            if other
            else ""
        )
    )
    seen = (
        f": two calls on the example gave different outputs (max |first - second| {repeated.max_abs:.3g}, {repeated.output})"
        if repeated is not None
        else ""
    )
    return error(
        "build.nondeterministic",
        PHASE,
        "the model's forward draws random numbers: " + "; ".join(parts) + seen,
        expected="a deterministic forward (eval mode, no random ops)",
        found="; ".join(parts),
        hint=hint or "remove the random op from forward",
        evidence=evidence,
    )


def _stateful_finding(state: GraphState, eval_hint: str | None) -> Finding:
    """``build.stateful_model``: buffers updated in place, training-mode BatchNorm included."""
    parts = _state_parts(state)
    hint = (
        eval_hint + " (BatchNorm in training mode uses batch statistics and updates its running ones)"
        if state.batch_norm_training and eval_hint
        # both behaviours seen on this model (tests/integration/models_divergence.py, counter):
        # the package's `count` gave 4, 4, 4 on torch 2.13 and 4, 5, 6 on 2.15
        else "make the state an explicit input and output of forward (the package keeps its own copy of every buffer: "
        "seen on a counter model, torch 2.13's package starts each call from the value it was built with and 2.15's "
        "carries the update from call to call; either way the state is the package's, not the caller's)"
    )
    return error(
        "build.stateful_model",
        PHASE,
        "the model keeps state across calls: " + "; ".join(parts) + ": each call's result depends on the calls before it",
        expected="forward without side effects on its buffers",
        found="; ".join(parts),
        hint=hint,
        evidence={"mutated_buffers": list(state.mutated_buffers), "batch_norm_training": list(state.batch_norm_training)},
    )
