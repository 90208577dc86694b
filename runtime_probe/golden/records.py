"""The golden samples' records, checked before anything reads the data they point to.

A package without a signature can be edited after its build, hashes recomputed, so its golden
records are hostile input like any other. Three layers, each the first to know:

- the manifest (``id_problems``, called by the manifest's rules: ``manifest.invalid``): a sample id
  names its sample in every report and, with ``--save-inputs``/``--save-outputs``, the files
  ``SAMPLE.inputs.safetensors``; it must be a plain name (``runtime_probe.paths``), one per sample,
  and not the name of one of the probe's own runs (``inputs``, ``shapes``), whose files and report
  lines it would take over;
- the golden file's header, in the parent before any child reads it (``file_findings``): a file
  that is not a tensor file (an entry pointing at the ``.so``), a whole sample that leaves out an
  input or an output's reference, or points at a tensor the file does not hold;
- the data, in the child: each stored input through the guarded loader's own input checks, and
  the file's bytes as its reader checks them (BOOL bytes other than 0/1). ``invalid`` is the
  finding for all of these: the package is inconsistent, which is no failure of the model, so the
  escalation ladder never starts for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from runtime_probe.findings import Finding, error
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import Golden, Manifest
from runtime_probe.paths import plain_name_problem

__all__ = ["PROBE_RUNS", "file_findings", "id_problems", "invalid", "is_probe_run"]

# The probe's own runs, named like samples in its reports and in the files --save-inputs writes.
PROBE_RUNS = ("inputs", "shapes")


def is_probe_run(sample_id: str) -> bool:
    """``sample_id`` names one of the probe's own runs: --inputs, --shapes, or one of several
    --shapes sets (``shapes1``, ``shapes2``...: probe/shapes.py ``run_names``)."""
    return sample_id in PROBE_RUNS or (sample_id.startswith("shapes") and sample_id[6:].isascii() and sample_id[6:].isdigit())


_QUOTE = 300  # characters of a hostile value a finding quotes


def id_problems(golden: Golden) -> Iterator[str]:
    """Why the manifest's golden sample ids cannot be used, one line each (read after "the manifest")."""
    seen: set[str] = set()
    ids = [s.id for s in golden.samples] + [s.id for s in golden.compact_samples or ()]
    for sample_id in ids:
        why = plain_name_problem(sample_id)
        if why is not None:
            yield f"names a golden sample {sample_id[:80]!r}, which {why} (a sample id becomes a file name with --save-inputs)"
        elif is_probe_run(sample_id):
            flag = "--inputs" if sample_id == "inputs" else "--shapes"
            yield f"names a golden sample {sample_id!r}, the name of the probe's own {flag} run"
        elif sample_id in seen:
            yield f"names two golden samples {sample_id!r} (their reports and saved files would be one)"
        seen.add(sample_id)


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
