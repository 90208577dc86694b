"""Golden references for new weights, against the same compiled package (``aoti-guard references``).

The package's references are the build's eager outputs with the build's weights; a probe given
other weights can only check them for NaN/Inf (``constants.new_weights``). Here, on the build
side, the factory's model takes the new weights (``load_weights``: the probe's own decision of
which constant takes which tensor, ``plan_weights`` through ``check_weights``, then the model's
tensors against the package's constants: names, dtypes, shapes, and the values the compiled code
keeps), runs eager on the package's own golden inputs (whole samples as stored, compact ones
regenerated from their recipes by the generator the probe runs: runtime_probe/golden/cases.py),
and the outputs become the new references (``references``): whole outputs, or a compact sample's
digest at the same positions with its statistics and their tolerances recomputed
(golden_store.output_digest). The tolerances stay the build's: they bound the compiled code's
error against eager, measured at build time.

A factory whose model is not the package's (a tensor missing, another dtype or shape, another
value of a constant the compiled code keeps, outputs of other dtypes or sizes) is the caller's
mistake: a UsageError naming it (exit 2), before anything is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aoti_guard.builder.export.contract import dtype_name, tensor_sha256
from aoti_guard.builder.validate.golden_store import FORMAT, DigestPlace, output_digest
from aoti_guard.builder.validate.references import call_with_leaves
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.golden import cases as _cases
from runtime_probe.golden import compact as _compact
from runtime_probe.package.manifest import CompactSample, ConstantSpec, Golden, Manifest, reference_tolerance
from runtime_probe.package.weights import WeightsCheck, check_weights, keeps_unsaved
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import Finding, Severity
from runtime_probe.reporting.report import format_finding

__all__ = ["GoldenInputs", "NewGolden", "check_new_weights", "golden_inputs", "golden_record", "load_weights", "references"]

_LISTED = 8  # problems a refusal lists before "and N more"


def _refuse(what: str, problems: Sequence[str], hint: str) -> UsageError:
    shown = "\n  ".join(problems[:_LISTED]) + (f"\n  ... and {len(problems) - _LISTED} more" if len(problems) > _LISTED else "")
    return UsageError(f"{what}:\n  {shown}", hint=hint)


def check_new_weights(m: Manifest, path: str) -> WeightsCheck:
    """The weights file against the package's constants, as ``probe --weights`` checks it.

    Raises:
        UsageError: a tensor missing, unexpected, reshaped or retyped (each named), or the weights
            are the build's own (the package's references apply to them already).
    """
    check = check_weights(path, m.constants, keeps=keeps_unsaved(m))
    errors = [f for f in check.findings if f.severity is Severity.ERROR]
    if errors:
        raise _refuse(
            f"the weights file {path} does not fit the package's constants",
            [format_finding(f).replace("\n", "\n    ") for f in errors],
            "give a state_dict() or save_pretrained safetensors file of the model the package was built from",
        )
    if check.same_as_build:
        raise UsageError(
            f"the weights in {path} are the build's own: the package's references were made with them",
            hint="nothing to make: aoti-guard probe PKG --weights FILE compares them with the package's references already",
        )
    return check


def _tensor_at(model: Any, fqn: str) -> Any:
    """The model's tensor at ``fqn`` (a parameter, buffer or plain tensor attribute), or None."""
    import torch

    obj = model
    for part in fqn.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, torch.Tensor) else None


def _kind_problem(c: ConstantSpec, t: Any) -> str | None:
    if t is None:
        return f"{c.fqn}: the package has a {c.kind} {c.dtype}{list(c.shape)}, the factory's model has no such tensor"
    if dtype_name(t.dtype) != c.dtype or tuple(t.shape) != tuple(c.shape):
        return f"{c.fqn}: the package has {c.dtype}{list(c.shape)}, the factory's model {dtype_name(t.dtype)}{list(t.shape)}"
    return None


def load_weights(model: Any, m: Manifest, path: str, check: WeightsCheck) -> dict[str, str]:
    """Copy the weights file's tensors into ``model`` (checked by ``check_new_weights``) and
    return the new SHA-256 of each package constant they replace, by FQN.

    Raises:
        UsageError: the model is not the package's: a constant missing or of another dtype or
            shape, or another value of one the package keeps (inlined into the compiled code, or
            a non-persistent buffer no checkpoint holds).
    """
    import torch

    by_name = {c.fqn: c for c in m.constants} | {c.loaded_name: c for c in m.constants}
    problems: list[str] = []
    for c in m.constants:
        t = _tensor_at(model, c.fqn)
        if t is None and c.kind == "constant" and c.in_state_dict is False:
            continue  # made by the compiler or the tracer (_tensor_constant0): the package keeps it, the model has none
        problem = _kind_problem(c, t)
        if problem is not None:
            problems.append(problem)
    if problems:
        raise _refuse("the factory's model does not match the package's constants", problems, _NOT_THE_MODEL)
    given = _safetensors.load(path)
    with torch.no_grad():
        for name, tensor in given.items():
            target = _tensor_at(model, by_name[name].fqn) if name in by_name else None
            if target is not None:  # a tied name's tensor is its constant's: copied into the one storage
                target.copy_(tensor.to(target.device))
    loaded = {by_name[dst].fqn for dst in check.sources}
    # a tied name of a loaded constant is the same tensor (embed_tokens.weight of lm_head.weight),
    # listed as inlined because the package keeps one constant for both: it took the new value too
    loaded |= {a for c in m.constants if c.fqn in loaded for a in c.tied_with}
    digests: dict[str, str] = {}
    for c in m.constants:
        t = _tensor_at(model, c.fqn)
        if t is None:
            continue  # made by the compiler (above): the package keeps it, the model has no copy to differ
        digest = tensor_sha256(t.detach().to("cpu"))
        if c.fqn in loaded:
            digests[c.fqn] = digest
        elif digest != c.sha256:
            where = "inlined into the compiled code" if c.storage != "package" else "kept by the package (no checkpoint holds it)"
            problems.append(f"{c.fqn}: another value than the package's, which is {where}")
    if problems:
        raise _refuse("the factory's model holds other values than the package keeps", problems, _NOT_THE_MODEL)
    return digests


_NOT_THE_MODEL = (
    "give the factory the package was built from (the same model class and configuration); its own weights do not matter, "
    "--weights replaces them"
)


@dataclass
class GoldenInputs:
    """The package's golden samples' inputs, as the build made them: ``leaves`` per sample id in
    contract order; ``tensors``: the golden file's tensors (inputs, pools, digest positions)."""

    leaves: dict[str, list[Any]]
    tensors: dict[str, Any]


def golden_inputs(m: Manifest, golden_path: str) -> GoldenInputs:
    """Every golden sample's inputs: whole ones as stored, compact ones regenerated from their
    recipes (bounded before any allocation, their SHA-256 checked: runtime_probe/golden/cases.py).

    Raises:
        UsageError: the package's golden record cannot be used (a recipe outside its bounds, one
            that does not regenerate the build's values): its samples cannot be run again.
    """
    assert m.golden is not None
    cases, findings = _cases.compact_cases(m, golden_path)
    _refuse_findings(findings)
    tensors = _safetensors.load(golden_path)
    leaves: dict[str, list[Any]] = {}
    for s in m.golden.samples:
        leaves[s.id] = _leaves(m, {name: tensors[key] for name, key in s.inputs.items()})
    for sample_id, case in cases:
        made, reply = _cases.regenerate(case, tensors)
        if reply is not None:
            _refuse_findings(_cases.reply_findings(sample_id, reply) or [_unrun(sample_id)])
        captured = {name: tensors[key] for name, key in case["inputs"].items()}
        leaves[sample_id] = _leaves(m, {**captured, **made})
    return GoldenInputs(leaves, tensors)


def _unrun(sample_id: str) -> Finding:
    from runtime_probe.reporting.findings import error

    return error("golden.recipe_invalid", "golden", f"compact golden sample {sample_id} could not be made again")


def _refuse_findings(findings: Sequence[Finding]) -> None:
    if findings:
        raise _refuse(
            "the package's golden samples cannot be made again",
            [format_finding(f).replace("\n", "\n    ") for f in findings],
            "rebuild the package (aoti-guard build) with the model and these weights",
        )


def _leaves(m: Manifest, tensors: Mapping[str, Any]) -> list[Any]:
    """One sample's leaves in contract order: its tensors, and the values the model was specialized on."""
    return [tensors[i.name] if i.kind == "tensor" else i.value for i in m.io.inputs]


@dataclass(frozen=True)
class NewGolden:
    """The golden file with the new references, and the manifest's golden record for it."""

    data: bytes
    compact: tuple[CompactSample, ...] | None


def references(fn: Any, m: Manifest, inputs: GoldenInputs, device: str) -> NewGolden:
    """Run ``fn`` (the model with the new weights) on every golden sample; its outputs replace the
    references (whole samples: the output tensors; compact: the values at the digest's positions,
    the statistics and their tolerances). Inputs, pools and positions are kept as they are.

    Raises:
        UsageError: the model raised on a sample, or its outputs are not the package's (count,
            dtype, shape): it is not the model the package was built from.
    """
    assert m.golden is not None
    tensors = dict(inputs.tensors)
    for s in m.golden.samples:
        outs = _outputs(fn, m, s.id, inputs.leaves[s.id], device, {n: tuple(tensors[k].shape) for n, k in s.outputs.items()})
        for name, key in s.outputs.items():
            tensors[key] = outs[name]
    compact: list[CompactSample] = []
    for c in m.golden.compact_samples or ():
        outs = _outputs(fn, m, c.id, inputs.leaves[c.id], device, {d.output: tuple(d.shape) for d in c.outputs})
        digests = []
        for d in c.outputs:
            ref = outs[d.output]
            tensors[d.values] = ref.detach().reshape(-1)[tensors[d.indices]].clone()
            stats = _compact.reference_stats(ref, device=device if device.startswith("cuda") else None)
            digests.append(
                output_digest(
                    DigestPlace(d.output, d.dtype, d.shape, d.indices, d.values), stats, reference_tolerance(m.golden.tolerances, d.output)
                )
            )
        compact.append(dataclasses.replace(c, outputs=tuple(digests)))
    data = _safetensors.dumps(tensors, {"format": FORMAT})
    return NewGolden(data, tuple(compact) if m.golden.compact_samples is not None else None)


def _outputs(fn: Any, m: Manifest, sample_id: str, leaves: list[Any], device: str, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """The model's outputs on one sample, by contract name, each checked against the package's."""
    try:
        values = call_with_leaves(fn, m.io, leaves, device)
    except Exception as exc:  # noqa: BLE001 - the user's model may raise anything
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        raise UsageError(
            f"the factory's model raised on golden sample {sample_id}: {type(exc).__name__}: {first}", hint=_NOT_THE_MODEL
        ) from None
    if len(values) != len(m.io.outputs):
        raise _refuse(
            f"the factory's model returns {len(values)} output(s) on golden sample {sample_id}",
            [f"the package's {len(m.io.outputs)}: {', '.join(o.name for o in m.io.outputs)}"],
            _NOT_THE_MODEL,
        )
    out: dict[str, Any] = {}
    problems = []
    for spec, value in zip(m.io.outputs, values):
        if spec.tensor is None:
            continue
        found = f"{dtype_name(value.dtype)}{list(value.shape)}" if hasattr(value, "dtype") else type(value).__name__
        want = shapes.get(spec.name)
        if not hasattr(value, "dtype") or dtype_name(value.dtype) != spec.tensor.dtype or (want is not None and tuple(value.shape) != want):
            problems.append(f"{spec.name}: the package's is {spec.tensor.dtype}{list(want or ())}, the model's {found}")
        out[spec.name] = value
    if problems:
        raise _refuse(f"the factory's model's outputs on golden sample {sample_id} are not the package's", problems, _NOT_THE_MODEL)
    return out


def golden_record(m: Manifest, new: NewGolden) -> Golden:
    """The manifest's golden record for the new file (its size, its compact digests); the whole
    samples' records keep their keys, which now hold the new values."""
    assert m.golden is not None
    return dataclasses.replace(m.golden, nbytes=len(new.data), compact_samples=new.compact)
