"""Golden samples of the user's own: ``build --samples FILE.safetensors`` and ``BuildSpec(samples=[...])``.

A sample is one call's inputs, each tensor named by the contract's input name (the names the
guarded loader and ``probe --inputs`` use; ``aoti-guard inspect PKG`` lists them), given as a
.safetensors file or, in the library, as a mapping name -> tensor. The build checks every sample
against the contract right after export, before anything is compiled or run: the names (the one
reader of such files, ``runtime_probe.probe.inputs_file``), then each tensor by the guarded
loader's own rules (dtype, rank, sizes within the declared ranges, the table ranges of ids, and
the export guards when the build accepts them). A sample that breaks them is the user's mistake:
a UsageError (exit 2) naming the file, what failed, expected vs found. A sample that passes is
validated and stored like a generated one, with origin "user": captured inputs, stored as they
are, never as a recipe.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from aoti_guard.builder.golden import Sample
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.golden.recipe import EDGE_SAMPLE_IDS
from runtime_probe.guard.env import Env
from runtime_probe.guard.rules import Check, compile_leaf
from runtime_probe.guard.shape_guards import compile_guards
from runtime_probe.guard.values import with_value_check
from runtime_probe.package.manifest import InputSpec, IOContract
from runtime_probe.package.sample_ids import PROBE_RUNS, is_probe_run
from runtime_probe.probe.inputs_file import WRITE_HINT, InputsFileError, check_names, read_inputs_header
from runtime_probe.reporting.errors import InputContractError, UsageError
from runtime_probe.reporting.paths import plain_name

__all__ = ["check_sources", "load_user_samples"]

# The ids the build and the probe give samples of their own: a user sample never takes one.
_RESERVED = frozenset({"example", "min", "max", "mid", *EDGE_SAMPLE_IDS, *PROBE_RUNS})
_MAX_ID = 40


def _what(source: Any, i: int) -> str:
    """How messages name a sample: its file, or its place in BuildSpec.samples."""
    return f"sample file {os.fspath(source)}" if isinstance(source, (str, os.PathLike)) else f"BuildSpec.samples[{i}]"


def check_sources(sources: Sequence[Any], where: str) -> None:
    """The checks that need no contract, before any slow work: each source is a path to a
    safetensors file that exists, or a mapping. ``where`` names the list in messages.

    Raises:
        UsageError: a source of another type, a missing file, a folder, a file that is not safetensors.
    """
    if isinstance(sources, (str, os.PathLike, Mapping)):
        raise UsageError(f"{where} is one {type(sources).__name__}, not a list of samples", hint=f"give a list: {where}=[...]")
    for i, source in enumerate(sources):
        if isinstance(source, Mapping):
            continue
        if not isinstance(source, (str, os.PathLike)):
            raise UsageError(
                f"{where}[{i}] is a {type(source).__name__}",
                hint="give a path to a .safetensors file, or a mapping from input name to tensor",
            )
        try:
            read_inputs_header(os.fspath(source), (), _what(source, i))  # no names yet: the file alone
        except InputsFileError as exc:
            raise _usage(exc.message, exc.expected, exc.found, exc.hint) from None


def load_user_samples(
    sources: Sequence[Any], contract: IOContract, example_leaves: Sequence[Any], *, guards_accepted: bool
) -> tuple[list[Sample], list[dict[str, Any]]]:
    """The user's samples, checked against ``contract``, as golden samples (origin "user"), and
    their rows for the build report (id, source: the file or ``BuildSpec.samples[i]``, symbols).

    ``example_leaves``: the example's leaves in contract order (a leaf the model was specialized on,
    a constant, is taken from them). ``guards_accepted`` (--allow-export-guards): the samples must
    satisfy the export guards too (without it the build fails on the guards anyway).

    Raises:
        UsageError: a sample the model cannot take: unknown or missing names, a wrong dtype or
            rank, a size outside its range, an id outside its table, a broken export guard.
    """
    if not sources:
        return [], []
    import torch

    tensors = contract.tensor_inputs()
    checks = {spec.name: _leaf_check(spec, torch) for spec in tensors}
    guards = compile_guards(contract) if guards_accepted else None
    samples: list[Sample] = []
    rows: list[dict[str, Any]] = []
    taken = set(_RESERVED)
    for i, source in enumerate(sources):
        what = _what(source, i)
        named = _read(source, tensors, what)
        env = Env()
        try:
            for spec in tensors:
                checks[spec.name](named[spec.name], env)
            env.finish()
            if guards is not None:
                guards(env)
        except InputContractError as exc:
            hint = exc.hint or "make the sample fit the contract (aoti-guard inspect PKG shows it), or widen the dynamic range it breaks"
            raise _usage(f"{what}: {exc.message}", exc.expected, exc.found, hint) from None
        leaves = [named[spec.name] if spec.kind == "tensor" else example for spec, example in zip(contract.inputs, example_leaves)]
        sample_id = _sample_id(source, i, taken)
        taken.add(sample_id)
        symbols = {name: size for name, (size, _, _) in env.symbols.items()}
        label = os.fspath(source) if isinstance(source, (str, os.PathLike)) else f"BuildSpec.samples[{i}]"
        samples.append(Sample(sample_id, symbols, leaves, note=f"your sample, from {label}", origin="user"))
        rows.append({"id": sample_id, "source": label, "symbols": dict(symbols)})
    return samples, rows


def _leaf_check(spec: InputSpec, torch: Any) -> Check:
    """The guarded loader's check of one input, on the CPU (samples live there until they run),
    with its id range. The layout is not checked: a file holds contiguous tensors, and the child
    gives each the compiled layout before it runs (as it does for every golden sample)."""
    assert spec.tensor is not None
    check = compile_leaf(replace(spec, tensor=replace(spec.tensor, contiguous=True)), torch.device("cpu"), torch)
    if spec.tensor.value_range is not None:
        check = with_value_check(check, spec.name, spec.tensor.value_range, torch)
    return check


def _read(source: Any, inputs: Sequence[InputSpec], what: str) -> dict[str, Any]:
    """The sample's tensors by input name (CPU, contiguous); UsageError for unknown or missing
    names, or a file that cannot be read."""
    import torch

    try:
        if isinstance(source, Mapping):
            extra = check_names([str(k) for k in source], inputs, what)
        else:
            _, extra = read_inputs_header(os.fspath(source), inputs, what)
    except InputsFileError as exc:
        raise _usage(exc.message, exc.expected, exc.found, exc.hint) from None
    if extra:
        raise _usage(
            f"{what} has tensors the model does not take: {', '.join(extra)}",
            ", ".join(i.name for i in inputs),
            ", ".join(extra),
            "name each tensor after the model's input (aoti-guard inspect PKG lists them), and leave out the others",
        )
    if isinstance(source, Mapping):
        out = {}
        for spec in inputs:
            value = source[spec.name]
            if not isinstance(value, torch.Tensor):
                raise _usage(f"{what}: {spec.name} is a {type(value).__name__}", "a tensor", type(value).__name__, "give a torch.Tensor")
            out[spec.name] = value.detach().to("cpu").contiguous()
        return out
    try:
        return _safetensors.load(os.fspath(source), names=[i.name for i in inputs])
    except (_safetensors.SafetensorsError, OSError) as exc:
        raise _usage(f"{what} cannot be read: {exc}", "a safetensors file", str(exc)[:200], WRITE_HINT) from None


def _sample_id(source: Any, i: int, taken: set[str]) -> str:
    """A file's stem, made safe for a file name (probe --save-inputs writes SAMPLE.inputs.safetensors)
    and unique; ``userN`` for a mapping. A stem the build or probe uses itself (``max``) gets
    ``user-`` before it; one taken already, a number after it (``req-2``)."""
    if isinstance(source, Mapping):
        base = f"user{i + 1}"
    else:
        stem = os.path.basename(os.fspath(source))
        stem = stem[: -len(".safetensors")] if stem.endswith(".safetensors") else os.path.splitext(stem)[0]
        base = plain_name(stem, f"user{i + 1}", limit=_MAX_ID)  # the one rule for names that become file names
        if base in _RESERVED or is_probe_run(base):  # shapes2: the probe's second --shapes run
            base = f"user-{base}"[:_MAX_ID]
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def _usage(message: str, expected: str | None, found: str | None, hint: str) -> UsageError:
    """A user's sample the build cannot take: the message with expected vs found, and the hint."""
    told = "; ".join(part for part in (f"expected {expected}" if expected else "", f"found {found}" if found else "") if part)
    return UsageError(f"{message} ({told})" if told else message, hint=hint)
