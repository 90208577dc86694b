"""The export step's pieces: the eager run on the example inputs, ``torch.export``, and what to do
when it fails."""

from __future__ import annotations

import copy
from typing import Any

from aoti_guard.builder.resolve import describe_exception
from aoti_guard.spec import BuildSpec
from runtime_probe.findings import error
from runtime_probe.recorder import StepFailed

__all__ = ["eager_run", "export_hint", "export_program", "fresh_inputs", "suggested_fixes"]


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


def export_program(spec: BuildSpec, dynamic: Any) -> Any:
    """``torch.export.export`` of the spec. Raises StepFailed with the first useful lines and a hint."""
    import torch

    args, kwargs = fresh_inputs(spec)
    try:
        return torch.export.export(spec.model, args, kwargs, dynamic_shapes=dynamic)
    except Exception as exc:
        lines = describe_exception(exc)
        raise StepFailed(
            [
                error(
                    "build.export_failed",
                    "export",
                    f"torch.export could not export {spec.label}: {lines[0][:300]}",
                    found="\n".join(lines)[:3000],
                    hint=export_hint(exc),
                    evidence={"lines": lines},
                )
            ],
            "export failed",
        ) from exc


def suggested_fixes(text: str) -> list[str]:
    """The lines of torch.export's "Suggested fixes:" block (``_seq = Dim('_seq', min=1, max=64)``,
    ``seq = 8*_seq``), which its constraint errors end with: the one thing the user needs to know."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Suggested fixes:")
    except StopIteration:
        return []
    fixes = []
    for line in lines[start + 1 :]:
        if not line.startswith((" ", "\t")) or not line.strip():
            break
        fixes.append(line.strip())
    return fixes[:8]


def export_hint(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "data-dependent" in text or "GuardOnDataDependentSymNode" in text or "Could not guard on data-dependent" in text:
        return "the model branches on tensor values: use torch.cond, or torch._check(...) to state what holds"
    if "Constraints violated" in text or "specialized" in text:
        fixes = suggested_fixes(text)
        if fixes:
            return (
                "torch.export suggests: " + "; ".join(fixes) + ". Give the dimension that way: in the factory's dynamic_shapes "
                "(e.g. 8 * Dim('_seq', min=1, max=64)), or on the command line as a derived size "
                "(--dynamic INPUT:DIM=8*_seq:1..64)"
            )
        return "a dimension you marked dynamic was specialized by the model's code: narrow the Dim range or make that dimension static"
    if "Unsupported" in text or "graph break" in text.lower():
        return (
            "torch.export cannot trace this construct; see the first lines above and rewrite that part (no .item(), no Python side effects)"
        )
    return "run torch.export.export(model, args) alone to see the full error; see the torch.export docs for fixes"
