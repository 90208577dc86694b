"""References for validation: eager (and float64) outputs of the golden samples, and the golden
file that stores inputs and reference outputs without pickle (safetensors)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from aoti_guard.builder.validate.golden import Sample
from runtime_probe.findings import Finding, error, info, warning
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import GoldenSample, IOContract

__all__ = ["call_with_leaves", "eager_outputs", "fp64_outputs", "golden_payload", "sample_env"]

PHASE = "validate"


def call_with_leaves(fn: Any, contract: IOContract, leaves: Sequence[Any], device: str) -> list[Any]:
    import torch
    from torch.utils import _pytree as pytree

    moved = [v.to(device) if isinstance(v, torch.Tensor) else v for v in leaves]
    args, kwargs = pytree.tree_unflatten(moved, pytree.treespec_loads(contract.in_spec))
    with torch.no_grad():
        out = fn(*args, **kwargs)
    return [t.detach().to("cpu") if isinstance(t, torch.Tensor) else t for t in pytree.tree_leaves(out)]


def eager_outputs(fn: Any, contract: IOContract, samples: list[Sample], device: str) -> tuple[list[Sample], list[Finding]]:
    """Fill each sample's eager outputs; drop generated samples eager rejects."""
    kept: list[Sample] = []
    findings: list[Finding] = []
    for s in samples:
        try:
            s.outputs = call_with_leaves(fn, contract, s.leaves, device)
        except Exception as exc:  # noqa: BLE001 - the user's model may raise anything
            first = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if s.id == "example":
                findings.append(
                    error(
                        "build.eager_failed",
                        PHASE,
                        f"the eager model raised on its own example inputs: {first}",
                        hint="the factory's example inputs must run through the model",
                    )
                )
                return [], findings
            findings.append(
                warning(
                    "build.sample_dropped",
                    PHASE,
                    f"golden sample {s.id} ({sample_env(s)}) dropped: the eager model raised {first[:160]}",
                    hint="the dynamic range admits sizes the model cannot run: narrow the range (Dim min/max)",
                )
            )
            continue
        kept.append(s)
    return kept, findings


def sample_env(s: Sample | GoldenSample) -> str:
    """A sample's dynamic sizes for messages: "batch=1, seq=8", or "static"."""
    return ", ".join(f"{k}={v}" for k, v in sorted(s.symbols.items())) or "static"


def fp64_outputs(
    model: Any, contract: IOContract, samples: list[Sample], device: str
) -> tuple[dict[str, list[Any]] | None, Finding | None]:
    """Outputs of a float64 copy of the model, or why there are none."""
    import torch

    floating = [v for v in samples[0].leaves if isinstance(v, torch.Tensor) and v.is_floating_point()]
    if not floating and not any(p.is_floating_point() for p in _tensors_of(model)):
        return None, info("build.fp64_reference_skipped", PHASE, "no floating-point inputs or weights: float64 reference not needed")
    try:
        model64 = copy.deepcopy(model).to(torch.float64)
    except Exception as exc:  # noqa: BLE001
        return None, info(
            "build.fp64_reference_skipped", PHASE, f"the model cannot be copied to float64: {type(exc).__name__}: {str(exc)[:160]}"
        )
    refs: dict[str, list[Any]] = {}
    for s in samples:
        leaves64 = [v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in s.leaves]
        try:
            refs[s.id] = call_with_leaves(model64, contract, leaves64, device)
        except Exception as exc:  # noqa: BLE001
            return None, info(
                "build.fp64_reference_skipped",
                PHASE,
                f"the model does not run in float64: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}",
            )
    return refs, None


def _tensors_of(model: Any) -> list[Any]:
    try:
        return [*model.parameters(), *model.buffers()]
    except AttributeError:
        return []


def golden_payload(contract: IOContract, samples: list[Sample]) -> tuple[bytes, list[GoldenSample]]:
    """The golden file (safetensors) and its index: inputs and eager reference outputs per sample."""
    import torch

    tensors: dict[str, Any] = {}
    index = []
    for i, s in enumerate(samples):
        ins, outs = {}, {}
        for spec, value in zip(contract.inputs, s.leaves):
            if spec.kind == "tensor" and isinstance(value, torch.Tensor):
                key = f"s{i}.in.{spec.name}"
                tensors[key] = value
                ins[spec.name] = key
        for out_spec, value in zip(contract.outputs, s.outputs):
            if isinstance(value, torch.Tensor):
                key = f"s{i}.out.{out_spec.name}"
                tensors[key] = value
                outs[out_spec.name] = key
        index.append(GoldenSample(s.id, ins, outs, dict(s.symbols)))
    return _safetensors.dumps(tensors, {"format": "aoti-guard golden v1"}), index
