"""References for validation: eager (and float64) outputs of the golden samples, and the golden
file that stores inputs and reference outputs without pickle (safetensors)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from aoti_guard.builder.golden import Sample
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import GoldenSample, IOContract
from runtime_probe.reporting.findings import Finding, error, info, warning

__all__ = ["Float64Reference", "call_with_leaves", "eager_output", "golden_payload", "sample_env"]

PHASE = "validate"


def call_with_leaves(fn: Any, contract: IOContract, leaves: Sequence[Any], device: str) -> list[Any]:
    import torch
    from torch.utils import _pytree as pytree

    moved = [v.to(device) if isinstance(v, torch.Tensor) else v for v in leaves]
    args, kwargs = pytree.tree_unflatten(moved, pytree.treespec_loads(contract.in_spec))
    with torch.no_grad():
        out = fn(*args, **kwargs)
    return [t.detach().to("cpu") if isinstance(t, torch.Tensor) else t for t in pytree.tree_leaves(out)]


def eager_output(fn: Any, contract: IOContract, s: Sample, device: str) -> Finding | None:
    """Fill one sample's eager outputs (on the CPU). When the model raises: an error for its own
    example inputs (``build.eager_failed``: nothing can be validated), a warning for a generated
    sample, which is then dropped (``s.outputs`` stays empty)."""
    try:
        s.outputs = call_with_leaves(fn, contract, s.leaves, device)
        return None
    except Exception as exc:  # noqa: BLE001 - the user's model may raise anything
        first = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if s.id == "example":
        return error(
            "build.eager_failed",
            PHASE,
            f"the eager model raised on its own example inputs: {first}",
            hint="the factory's example inputs must run through the model",
        )
    return warning(
        "build.sample_dropped",
        PHASE,
        f"golden sample {s.id} ({sample_env(s)}) dropped: the eager model raised {first[:160]}",
        hint=f"the model refuses the values of the half-precision edge recipe {s.edge!r}; its other samples are validated as usual"
        if s.edge
        else "the dynamic range admits sizes the model cannot run: narrow the range (Dim min/max)",
    )


def sample_env(s: Sample | GoldenSample) -> str:
    """A sample's dynamic sizes for messages: "batch=1, seq=8", or "static"."""
    return ", ".join(f"{k}={v}" for k, v in sorted(s.symbols.items())) or "static"


class Float64Reference:
    """A float64 copy of the model, run one sample at a time (made on first use).

    ``skipped`` says why there is no reference (an info finding): nothing floating-point to
    widen, a model that cannot be copied, or one that raised in float64. A model that raises on
    a later sample (a GPU out of memory at the largest, say) leaves the samples before it judged
    against float64 and those after it against eager alone; the finding names the sample."""

    def __init__(self, model: Any, contract: IOContract, device: str, first: Sample) -> None:
        self.model, self.contract, self.device = model, contract, device
        self.skipped: Finding | None = None
        self._model64: Any = None
        self._judged: list[str] = []
        import torch

        floating = [v for v in first.leaves if isinstance(v, torch.Tensor) and v.is_floating_point()]
        if not floating and not any(p.is_floating_point() for p in _tensors_of(model)):
            self.skipped = info("build.fp64_reference_skipped", PHASE, "no floating-point inputs or weights: float64 reference not needed")

    def outputs(self, s: Sample) -> list[Any] | None:
        """The float64 model's outputs on ``s`` (CPU), or None once there is no reference."""
        import torch

        if self.skipped is not None:
            return None
        if self._model64 is None:
            try:
                self._model64 = copy.deepcopy(self.model).to(torch.float64)
            except Exception as exc:  # noqa: BLE001
                self.skipped = info(
                    "build.fp64_reference_skipped", PHASE, f"the model cannot be copied to float64: {type(exc).__name__}: {str(exc)[:160]}"
                )
                return None
        leaves64 = [v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in s.leaves]
        try:
            refs = call_with_leaves(self._model64, self.contract, leaves64, self.device)
        except Exception as exc:  # noqa: BLE001
            text = str(exc).splitlines()[0][:160] if str(exc) else ""
            before = f"; sample(s) {', '.join(self._judged)} had it, the rest are judged against eager alone" if self._judged else ""
            self.skipped = info(
                "build.fp64_reference_skipped",
                PHASE,
                f"the model does not run in float64 on sample {s.id} ({sample_env(s)}): {type(exc).__name__}: {text}{before}",
            )
            self.close()
            return None
        self._judged.append(s.id)
        return refs

    def close(self) -> None:
        """Let the float64 copy go (its memory is twice the model's)."""
        self._model64 = None


def _tensors_of(model: Any) -> list[Any]:
    try:
        return [*model.parameters(), *model.buffers()]
    except AttributeError:
        return []


def golden_payload(contract: IOContract, samples: list[Sample]) -> tuple[bytes, list[GoldenSample]]:
    """The golden file (safetensors) and its index: inputs and eager reference outputs per sample
    (inputs only for samples without outputs: the file the validation child reads)."""
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
