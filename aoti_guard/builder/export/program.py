"""The export step's pieces: the eager run on the example inputs, ``torch.export``, and what to do
when it fails."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from aoti_guard.builder import resources
from aoti_guard.builder.export.hints import (
    Advice,
    Declared,
    Tie,
    advise,
    declared_dims,
    library_type_hint,
    pinned_by_a_tie,
    suggested_fixes,
)
from aoti_guard.builder.export.ranges import example_outside_advice
from aoti_guard.builder.export.ties import find_ties
from aoti_guard.builder.resolve.binding import Binding
from aoti_guard.builder.resolve.target import describe_exception
from aoti_guard.spec import BuildSpec
from runtime_probe.reporting.findings import error
from runtime_probe.reporting.recorder import StepFailed

__all__ = ["eager_run", "export_advice", "export_hint", "export_program", "fresh_inputs", "suggested_fixes"]


def fresh_inputs(spec: BuildSpec) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A deep copy of the example inputs, for one call of the model.

    A model may change its inputs in place: a Hugging Face ``DynamicCache`` is extended by every
    eager forward, so a second use of the same object sees a longer cache (and an export after
    the eager run would trace sizes that contradict the other inputs, e.g. a mask of past + 1).
    Every consumer of the examples (the eager run, export, the contract) gets its own copy.
    """
    return copy.deepcopy((tuple(spec.args), dict(spec.kwargs)))


def eager_run(eager_fn: Any, spec: BuildSpec) -> Any:
    """The model's outputs on its example inputs. Raises StepFailed when it does not run."""
    import torch

    args, kwargs = fresh_inputs(spec)
    try:
        with torch.no_grad():
            return eager_fn(*args, **kwargs)
    except Exception as exc:
        exhausted = resources.from_exception(exc)
        if exhausted is not None:
            raise StepFailed([resources.finding(exhausted, "export", f"the eager run of {spec.label}")], exhausted.what) from exc
        raise StepFailed(
            [
                error(
                    "build.eager_failed",
                    "export",
                    f"the model raised on its example inputs: {type(exc).__name__}",
                    found="\n".join(describe_exception(exc)),
                    hint="make the model run eagerly on the example inputs first",
                )
            ],
            "the eager model does not run",
        ) from exc


def export_program(spec: BuildSpec, dynamic: Any, binding: Binding, *, from_flags: bool = False) -> Any:
    """``torch.export.export`` of the spec. Raises StepFailed with torch's message, line by line,
    and a hint built from it (``export_hint``). ``binding``: the example bound to the model's
    signature at resolve; ``from_flags``: the dynamic dims came from ``--dynamic`` (the hint then
    gives flags first)."""
    import torch

    args, kwargs = fresh_inputs(spec)
    try:
        return torch.export.export(spec.model, args, kwargs, dynamic_shapes=dynamic)
    except Exception as exc:
        lines = describe_exception(exc, limit=_MESSAGE_LINES)
        exhausted = resources.from_exception(exc)
        if exhausted is not None:
            raise StepFailed([resources.finding(exhausted, "export", f"exporting {spec.label}")], exhausted.what) from exc
        declared = _declared(spec, dynamic, binding)
        ties = _ties(spec, dynamic, declared, f"{exc}", binding)
        advice = export_advice(exc, declared, from_flags=from_flags, ties=ties)
        raise StepFailed(
            [
                error(
                    "build.export_failed",
                    "export",
                    f"torch.export could not export {spec.label}: {lines[0][:300]}",
                    found="\n".join(lines)[:_FOUND_CHARS],
                    hint=advice.hint,
                    evidence={"lines": lines, **advice.evidence()},
                )
            ],
            "export failed",
        ) from exc


_MESSAGE_LINES = 60  # torch's constraint errors list a line per guard before "Suggested fixes:"
_FOUND_CHARS = 8000


def _declared(spec: BuildSpec, dynamic: Any, binding: Binding) -> list[Declared]:
    """The dims the user declared dynamic, for the hint; none where they cannot be read."""
    try:
        return declared_dims(dynamic, binding.values(spec.args, spec.kwargs))
    except Exception:  # noqa: BLE001 - the hint falls back on the dims torch's message names
        return []


def _ties(spec: BuildSpec, dynamic: Any, declared: Sequence[Declared], text: str, binding: Binding) -> tuple[Tie, ...]:
    """The static inputs tied to a declared dim that torch pinned to its example's size
    (export/ties.py: one more export); none when no declared dim was pinned that way."""
    if not pinned_by_a_tie(text, declared):
        return ()
    args, kwargs = fresh_inputs(spec)
    return find_ties(spec.model, args, kwargs, dynamic, declared, binding)


def export_advice(exc: BaseException, declared: Sequence[Declared] = (), *, from_flags: bool = False, ties: Sequence[Tie] = ()) -> Advice:
    """The hint for an export failure, built from torch's own message (export/hints.py): the
    ``--dynamic`` flags and ``dynamic_shapes`` code giving the sizes asked, the static inputs tied
    to a declared dim (``ties``), an example outside the declared range (export/ranges.py), a
    library type's recipe."""
    text = f"{type(exc).__name__}: {exc}"
    if "data-dependent" in text or "GuardOnDataDependentSymNode" in text or "Could not guard on data-dependent" in text:
        return Advice("the model branches on tensor values: use torch.cond, or torch._check(...) to state what holds")
    library = library_type_hint(text)
    if library is not None:
        return Advice(library)
    outside = example_outside_advice(text, declared, from_flags=from_flags)
    if outside is not None:
        return outside
    if "Constraints violated" in text or "specialized" in text or "Suggested fixes:" in text:
        advice = advise(text, declared, from_flags=from_flags, ties=ties)
        if advice is not None:
            return advice
        return Advice(
            "torch.export found the dynamic dims inconsistent with the model's code but suggested no fix: its lines above name "
            "the guards; narrow the Dim range to what they allow, or make that dimension static"
        )
    if "Unsupported" in text or "graph break" in text.lower():
        return Advice(
            "torch.export cannot trace this construct; see the first lines above and rewrite that part (no .item(), no Python side effects)"
        )
    return Advice("torch.export's message is above, line by line; see the torch.export docs for fixes")


def export_hint(exc: BaseException, declared: Sequence[Declared] = (), *, from_flags: bool = False, ties: Sequence[Tie] = ()) -> str:
    """``export_advice``'s hint in words."""
    return export_advice(exc, declared, from_flags=from_flags, ties=ties).hint
