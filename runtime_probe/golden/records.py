"""The golden samples' records, checked before anything reads the data they point to.

A package without a signature can be edited after its build, hashes recomputed, so its golden
records are hostile input like any other. Three layers, each the first to know:

- the manifest (``runtime_probe.package.sample_ids``, one of the manifest's rules:
  ``manifest.invalid``): a sample id must be a plain name, one per sample, and not the name of one
  of the probe's own runs;
- the golden file's header, in the parent before any child reads it (``file_findings``): a file
  that is not a tensor file (an entry pointing at the ``.so``), a whole sample that leaves out an
  input or an output's reference, or points at a tensor the file does not hold;
- the data, in the child: each stored input through the guarded loader's own input checks, and
  the file's bytes as its reader checks them (BOOL bytes other than 0/1). ``invalid`` is the
  finding for all of these: the package is inconsistent, which is no failure of the model, so the
  escalation ladder never starts for it.
"""

from __future__ import annotations

from typing import Any

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import Manifest
from runtime_probe.reporting.findings import Finding, error

__all__ = ["file_findings", "invalid"]

_QUOTE = 300  # characters of a hostile value a finding quotes


def invalid(sample: str | None, why: str, *, phase: str, entry: str | None = None, argument: str | None = None, **kw: Any) -> Finding:
    """``golden.invalid``: ``sample``'s stored data (None: the whole golden file ``entry``) cannot be
    run as the package's own manifest and contract say; ``why`` says what is wrong with it.
    ``kw``: expected, found."""
    evidence: dict[str, Any] = {}
    if sample is not None:
        evidence["sample"] = sample
    if entry is not None:
        evidence["entry"] = entry
    if argument is not None:
        evidence["argument"] = argument
    return error(
        "golden.invalid",
        phase,
        f"golden sample {sample} was not run: {why[:_QUOTE]}" if sample is not None else f"no golden sample was run: {why[:_QUOTE]}",
        expected=(kw.get("expected") or "stored data that fits the manifest's own records and contract")[:_QUOTE],
        found=(kw.get("found") or why)[:_QUOTE],
        hint="the package is inconsistent: its golden data does not match its own manifest (a call that breaks the contract, "
        "runtime_probe.load() refuses); rebuild it, and sign packages with --sign-key (an unsigned manifest may have been edited)",
        evidence=evidence,
    )


def file_findings(m: Manifest, golden_path: str, phase: str) -> tuple[list[Finding], set[str] | None]:
    """The whole samples' records against the golden file's header (standard library, no tensor
    data): the findings and the ids of the samples that must not run; None in place of the ids
    when the file itself cannot be read (then no sample, whole or compact, may run)."""
    assert m.golden is not None
    entry = m.golden.entry
    try:
        header = _safetensors.read_header(golden_path).tensors
    except (_safetensors.SafetensorsError, OSError) as exc:
        why = f"the golden file {entry} is not a tensor file: {exc}"
        return [invalid(None, why, phase=phase, entry=entry, expected="a safetensors file", found=str(exc))], None
    findings: list[Finding] = []
    bad: set[str] = set()
    tensor_inputs = [i.name for i in m.io.tensor_inputs()]
    tensor_outputs = [o.name for o in m.io.outputs if o.tensor is not None]
    for s in m.golden.samples:
        problem, argument = _sample_problem(s.inputs, s.outputs, tensor_inputs, tensor_outputs, header)
        if problem is not None:
            findings.append(invalid(s.id, problem, phase=phase, entry=entry, argument=argument))
            bad.add(s.id)
    return findings, bad


def _sample_problem(
    inputs: dict[str, str],
    outputs: dict[str, str],
    tensor_inputs: list[str],
    tensor_outputs: list[str],
    header: dict[str, _safetensors.TensorInfo],
) -> tuple[str | None, str | None]:
    """(why, the input or output named) for a whole sample whose record the child could not run
    or whose outputs it would leave unchecked; (None, None) when it can run."""
    for name in tensor_inputs:
        stored = inputs.get(name)
        if stored is None:
            return f"its record gives no stored value for input {name!r}", name
        if stored not in header:
            return f"its input {name!r} is stored under {stored[:60]!r}, which the golden file does not hold", name
    for name in tensor_outputs:
        ref = outputs.get(name)
        if ref is None:  # the child would compare nothing, and the sample would read as checked
            return f"its record gives no reference for output {name!r}", name
        if ref not in header:
            return f"its reference for output {name!r} is stored under {ref[:60]!r}, which the golden file does not hold", name
    return None, None
