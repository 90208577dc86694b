"""The probe's golden phase: every recorded sample run and judged within its tolerance, then
``--shapes`` and ``--inputs``.

Before a sample runs, its record and its data are checked as the package's own: the records
against the golden file's header here (runtime_probe/golden/records.py), the stored inputs through
the guarded loader's input checks in the child (child/ops.py). Data that fails them is a package
finding (``golden.invalid``), never a run error, and is not escalated: the model did not run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from runtime_probe.child.worker import ChildFailure, ChildRaised
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.golden import cases as _golden_cases
from runtime_probe.golden import records as _golden_records
from runtime_probe.golden.sample_rule import sample_rule
from runtime_probe.ladder.steps import Replay
from runtime_probe.package.placement import input_record, on_device, output_devices
from runtime_probe.package.sample_ids import is_probe_run
from runtime_probe.probe.input_values import name_the_index, value_range_findings
from runtime_probe.probe.inputs_file import WRITE_HINT, InputsFileError, read_inputs_header
from runtime_probe.probe.raw_times import keep_raw
from runtime_probe.probe.shapes import describe, parse_shapes, resolve_shapes, run_names, shape_sets
from runtime_probe.probe.state import Device, Phase, Shared, child_finding, replay_kind
from runtime_probe.probe.throughput import run_throughput
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import Finding, error, has_errors, warning
from runtime_probe.reporting.paths import name_in_folder, probe_paths

__all__ = ["golden_phase"]


def _run_args(shared: Shared, dev: Device, golden_path: str, sample: Mapping[str, Any], *, user: bool) -> dict[str, Any]:
    m = shared.manifest
    assert m is not None
    golden = m.golden if (dev.golden_valid and not user) else None
    sample_id = str(sample.get("id"))
    # held to the sample's own tolerances where it has them, NaN/Inf judged by the build's rule for it
    tolerances = {t.output: [t.atol, t.rtol] for t in golden.tolerances_of(sample_id)} if golden is not None else None
    equal_nan = golden is not None and sample_rule(sample_id, allow_nonfinite=golden.allow_nonfinite).matched_nonfinite
    inputs = [input_record(i) for i in m.io.inputs]
    args: dict[str, Any] = {
        "golden_path": golden_path,
        "sample": dict(sample),
        "inputs": inputs,
        "in_spec": m.io.in_spec,
        "outputs": [o.name for o in m.io.outputs if o.tensor is not None],  # the runner returns tensors only
        "device": dev.device,
        "tolerances": tolerances,
        "equal_nan": equal_nan,
    }
    if user:
        # --inputs-device places every input there (a serving bug replayed); without it each input
        # goes where the package takes it (child/ops.py, package/placement.py)
        args.update(input_device=shared.options.inputs_device, contract_from=os.path.abspath(shared.path))
    else:  # the package's own data, through the guarded loader's checks before it runs (child/ops.py)
        args.update(contract_from=os.path.abspath(shared.path), stored=True)
    return args


def _replay_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The failing run's arguments for the ladder's children. The contract check is dropped: it
    passed here (a rejected input is a finding, never a replay), and each rerun would repeat it."""
    timing = ("iterations", "warmup", "duration_s", "raw_times")  # "resize" stays: the replay needs the same sizes
    return {k: v for k, v in args.items() if k not in ("contract_from", "stored", *timing, "save_path", "save_inputs_path")}


def _extras(shared: Shared, dev: Device, sample_id: str) -> dict[str, Any]:
    """--iterations and --save-inputs/--save-outputs for one run (a section per device: its label
    goes into the file name with --all-devices)."""
    opts = shared.options
    prefix = "" if not opts.all_devices else f"{dev.device.replace(':', '')}."
    timed = opts.iterations > 1 or opts.duration_s is not None
    out: dict[str, Any] = {"iterations": opts.iterations, "warmup": opts.warmup, "duration_s": opts.duration_s} if timed else {}
    if timed and opts.latency_raw is not None:
        out["raw_times"] = True
    rule = probe_paths(shared.source, vars(opts), reports=False)  # the path rule, asked again for each file
    # a sample id is a plain name (the manifest's rules refuse any other): never a path outside the folder
    if opts.save_inputs is not None:
        out["save_inputs_path"] = name_in_folder(opts.save_inputs, sample_id, prefix=prefix, suffix=".inputs.safetensors")
        rule.check_file("--save-inputs", out["save_inputs_path"])
    if opts.save_outputs is not None:
        out["save_path"] = name_in_folder(opts.save_outputs, sample_id, prefix=prefix, suffix=".outputs.safetensors")
        rule.check_file("--save-outputs", out["save_path"])
    return out


@dataclass
class _Tally:
    """What the golden phase has gathered so far (an accumulator, filled run by run): its
    findings, the runs' report entries, how each stored sample is kept (sample -> "full" |
    "compact"), and the files whose data the reader refused (nothing more runs from them)."""

    findings: list[Finding] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    stored: dict[str, str] = field(default_factory=dict)
    refused_files: set[str] = field(default_factory=set)


def golden_phase(shared: Shared, dev: Device) -> Phase:
    assert dev.worker is not None and shared.archive is not None
    tally = _Tally()
    cases = _cases(shared, dev, tally)
    for sample_id, args in cases:
        if args["golden_path"] in tally.refused_files:
            continue
        try:
            reply = dev.worker.request("run", shared.options.timeout_s, key="release", **args, **_extras(shared, dev, sample_id))
        except ChildFailure as exc:
            _child_failed(shared, dev, tally.findings, (sample_id, args), exc)
            if isinstance(exc, ChildRaised) and dev.device_type == "cpu":
                continue  # the child lives on; a CUDA error poisons the context, so stop there
            break
        _record_reply(shared, dev, tally, (sample_id, args), reply)
    detail: dict[str, Any] = {"runs": tally.runs, "compared": dev.golden_valid}
    detail["checked"] = [_golden_cases.describe(r["sample"], r["stored"], r.get("outputs")) for r in tally.runs if "stored" in r]
    if not cases and not has_errors(tally.findings):  # nothing ran: not "passed"
        detail["skipped"] = "no golden samples in the package" + (", and no --inputs" if shared.options.inputs is None else "")
    if shared.options.threads is not None:
        detail["throughput"] = _throughput(shared, dev, tally.findings)
    return tally.findings, detail, True


def _throughput(shared: Shared, dev: Device, findings: list[Finding]) -> dict[str, Any]:
    """--threads on the first sample that ran (probe/throughput.py): its detail; its findings, or
    the child's failure as one, go to ``findings``."""
    if not dev.ran:
        return {"skipped": "no sample ran, so there is nothing to time with several callers"}
    what, args = dev.ran[0]
    try:
        found, detail = run_throughput(shared, dev, what, args)
    except ChildFailure as exc:
        findings.append(child_finding(exc, f"timing {what} with concurrent callers", "run", shared))
        return {"sample": what, "error": findings[-1].message}
    findings.extend(found)
    return detail


def _cases(shared: Shared, dev: Device, tally: _Tally) -> list[tuple[str, dict[str, Any]]]:
    """Every run of the phase, in order: the package's own samples (their records checked against
    the golden file's header first), then the --shapes sets, then the --inputs file."""
    m = shared.manifest
    cases: list[tuple[str, dict[str, Any]]] = []
    bad: set[str] | None = set()  # whole samples whose records the golden file cannot serve (None: none can)
    if m is None or m.golden is None or not (m.golden.samples or m.golden.compact_samples) or shared.golden_path is None:
        tally.findings.append(
            warning(
                "golden.missing",
                "golden",
                "the package has no golden samples: outputs were not checked",
                hint="build with aoti-guard build (and a golden size cap that fits the samples)",
            )
        )
    else:
        # the records against the golden file's header, before any child reads it (golden/records.py)
        problems, bad = _golden_records.file_findings(m, shared.golden_path, "golden")
        tally.findings.extend(problems)
        if bad is None:
            tally.refused_files.add(shared.golden_path)
        else:
            cases, tally.stored = _stored_cases(shared, dev, bad, tally.findings)
    sets = shape_sets(shared.options.shapes)
    if sets and shared.golden_path not in tally.refused_files:
        cases += [(name, _shapes_case(shared, dev, bad or set(), text)) for name, text in zip(run_names(len(sets)), sets)]
    if shared.options.inputs is not None and m is not None:
        user_case, user_findings = _user_inputs(shared, dev)
        tally.findings.extend(user_findings)
        if user_case is not None:
            cases.append(("inputs", user_case))
    return cases


def _child_failed(shared: Shared, dev: Device, findings: list[Finding], case: tuple[str, dict[str, Any]], exc: ChildFailure) -> None:
    """A run the child failed (it raised or died): its finding, and the first one's replay for the
    escalate phase unless the inputs were refused."""
    sample_id, args = case
    what = _what(sample_id, args)
    findings.append(child_finding(exc, f"running {what}", "run", shared))
    if sample_id == "inputs" and findings[-1].code == "run.device_assert":
        findings[-1] = _named_index(shared, findings[-1])
    if dev.replay is None and not any(f.code.startswith("input.") for f in findings[-1:]):
        dev.replay = Replay("run", replay_kind(exc), _replay_args(args), sample=what)


def _record_reply(shared: Shared, dev: Device, tally: _Tally, case: tuple[str, dict[str, Any]], reply: Mapping[str, Any]) -> None:
    """One run's reply: a refusal or a compact sample that could not run as its finding, or the
    run's report entry and its judged outputs (the first failure's replay for the escalate phase)."""
    sample_id, args = case
    refusal = _refusal(shared, sample_id, reply)  # the model did not run: never a replay
    if refusal is not None:
        tally.findings.append(refusal)
        if reply.get("data_error"):
            tally.refused_files.add(args["golden_path"])
        return
    unchecked = _golden_cases.reply_findings(sample_id, reply)  # a compact sample that could not run
    if unchecked:
        tally.findings.extend(unchecked)
        return
    tally.runs.append(_run_entry(sample_id, args, reply, tally.stored))
    if reply.get("times_s"):
        keep_raw(shared, dev, tally.runs[-1], reply["times_s"])
    assert shared.manifest is not None  # a golden run needs the manifest's outputs
    new = _judge(sample_id, reply, output_devices(shared.manifest, dev.device))
    tally.findings.extend(new)
    dev.ran.append((_what(sample_id, args), _replay_args(args)))  # memcheck reruns it (escalate)
    if dev.replay is None and any(f.code in ("run.nonfinite", "golden.mismatch") for f in new):
        kind = "nonfinite" if any(f.code == "run.nonfinite" for f in new) else "mismatch"
        dev.replay = Replay("run", kind, _replay_args(args), sample=_what(sample_id, args))


def _run_entry(sample_id: str, args: Mapping[str, Any], reply: Mapping[str, Any], stored: Mapping[str, str]) -> dict[str, Any]:
    """A run's entry in the phase's report."""
    entry: dict[str, Any] = {"sample": sample_id, "seconds": reply.get("seconds"), "outputs": reply.get("outputs")}
    if sample_id in stored:
        entry["stored"] = stored[sample_id]
    if sample_id == "inputs":  # the report names the file that ran and the inputs it fed
        entry["file"] = args["golden_path"]
        entry["inputs"] = list(args["sample"]["inputs"])
    if "resize" in args:  # a --shapes run: which sizes it ran (and timed)
        entry["shapes"] = describe(args["resize"])
    if reply.get("latency_ms"):
        entry["latency_ms"] = reply["latency_ms"]
    return entry


def _what(sample_id: str, args: Mapping[str, Any]) -> str:
    """The run, as a finding names it."""
    if sample_id == "inputs":
        return "the --inputs"
    if "resize" in args:
        return f"the --shapes {describe(args['resize'])} inputs"
    return f"golden sample {sample_id}"


def _stored_cases(
    shared: Shared, dev: Device, bad: set[str], findings: list[Finding]
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """The package's own samples to run (whole ones whose records passed, then compact ones whose
    recipes did; ``findings`` gets the compact refusals) and how each is stored."""
    m = shared.manifest
    assert m is not None and m.golden is not None and shared.golden_path is not None
    samples = [s for s in m.golden.samples if s.id not in bad]
    samples = samples[:1] if shared.options.fast else samples
    compact, invalid = _golden_cases.compact_cases(m, shared.golden_path)  # checked before any child allocates
    findings += invalid
    compact = compact[: 0 if samples else 1] if shared.options.fast else compact
    stored = {s.id: "full" for s in samples} | {sid: "compact" for sid, _ in compact}
    cases = [
        (
            s.id,
            _run_args(
                shared, dev, shared.golden_path, {"id": s.id, "inputs": s.inputs, "outputs": s.outputs, "symbols": s.symbols}, user=False
            ),
        )
        for s in samples
    ]
    cases += [(sid, _run_args(shared, dev, shared.golden_path, sample, user=False)) for sid, sample in compact]
    return cases, stored


def _refusal(shared: Shared, sample_id: str, reply: Mapping[str, Any]) -> Finding | None:
    """The finding for a run the child refused before the model ran (None: it ran). The package's
    own data is a package finding (``golden.invalid``); the user's --inputs or --shapes, theirs."""
    m = shared.manifest
    assert m is not None
    entry = m.golden.entry if m.golden is not None else None
    ce, data = reply.get("contract_error"), reply.get("data_error")
    if ce and not is_probe_run(sample_id):
        why = f"its stored inputs break the package's own contract: {ce['message']}"
        return _golden_records.invalid(
            sample_id, why, phase="golden", entry=entry, argument=ce.get("argument"), expected=ce.get("expected"), found=ce.get("found")
        )
    if ce:
        return error(
            ce["code"],
            "golden",
            f"{'--inputs' if sample_id == 'inputs' else '--shapes'}: {ce['message']}",
            expected=ce.get("expected"),
            found=ce.get("found"),
            hint=ce.get("hint") or "the inputs break the package's contract; runtime_probe.load() rejects them the same way",
            evidence={"argument": ce.get("argument")},
        )
    if data and sample_id == "inputs":
        assert shared.options.inputs is not None
        exc = InputsFileError(
            f"--inputs {shared.options.inputs} cannot be read: {str(data)[:300]}",
            expected="a safetensors file its reader accepts",
            found="data the reader refuses",
            hint=WRITE_HINT,
        )
        return _inputs_file_finding(exc)
    if data:  # the file is read whole: no later sample of it can run either
        why = f"the golden file {entry} cannot be read as its records say: {data}"
        return _golden_records.invalid(None, why, phase="golden", entry=entry, expected="data its reader accepts", found=str(data))
    return None


def _shapes_case(shared: Shared, dev: Device, bad: set[str], text: str) -> dict[str, Any]:
    """One --shapes set (``text``): inputs at the sizes asked for, made in the child by the golden samples' generator
    from the first golden sample's values, checked against the contract before they run (a size
    outside it is a finding). A package whose samples were all over the cap (stored compact)
    gives its first compact sample: the child makes its inputs again from their recipes first."""
    m = shared.manifest
    base: dict[str, Any] = {}
    unreadable = ""
    if m is not None and m.golden is not None and shared.golden_path is not None:
        first = next((s for s in m.golden.samples if s.id not in bad), None)  # a record the file can serve
        if first is not None:
            base = {"inputs": dict(first.inputs)}
        else:
            compact, problems = _golden_cases.compact_cases(m, shared.golden_path)
            if compact:
                base = {"inputs": compact[0][1]["inputs"], "recipes": compact[0][1]["recipes"]}
            elif m.golden.compact_samples:
                unreadable = " it can read (" + "; ".join(f.message for f in problems)[:300] + ")"
            elif m.golden.samples:
                unreadable = " it can read (each whole sample's record is golden.invalid)"
    if not base:
        raise UsageError(
            "--shapes generates inputs from the package's golden samples, and this package has none" + unreadable,
            hint="build it with aoti-guard build, or time your own inputs with --inputs FILE.safetensors --iterations N",
        )
    assert m is not None and shared.golden_path is not None  # base is only set when both are
    sizes, symbols = resolve_shapes(parse_shapes(text), m.io.inputs)
    sample = {"id": "shapes", "outputs": {}, "symbols": symbols, **base}
    args = _run_args(shared, dev, shared.golden_path, sample, user=True)
    args["resize"] = sizes
    return args


def _user_inputs(shared: Shared, dev: Device) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The --inputs file as one more sample, after checking its tensor names (header only)."""
    assert shared.manifest is not None and shared.options.inputs is not None
    try:  # the one reader of a file of named inputs (build --samples reads its files with it too)
        header, extra = read_inputs_header(shared.options.inputs, shared.manifest.io.tensor_inputs(), f"--inputs {shared.options.inputs}")
    except InputsFileError as exc:
        return None, [_inputs_file_finding(exc)]
    names = [i.name for i in shared.manifest.io.tensor_inputs()]
    findings = [warning("input.count", "golden", f"--inputs has tensors the model does not take: {', '.join(extra)}")] if extra else []
    values = value_range_findings(shared.options.inputs, header, shared.manifest.io.tensor_inputs(), "golden")
    if values:
        return None, findings + values  # never hand native code an index outside its table
    sample = {"id": "inputs", "inputs": {n: n for n in names}, "outputs": {}, "symbols": {}}
    return _run_args(shared, dev, os.path.abspath(shared.options.inputs), sample, user=True), findings


def _inputs_file_finding(exc: InputsFileError) -> Finding:
    """An --inputs file the probe cannot use, as its finding."""
    evidence = {"argument": exc.argument} if exc.argument is not None else {}
    return error("input.count", "golden", exc.message, expected=exc.expected, found=exc.found, hint=exc.hint, evidence=evidence)


def _named_index(shared: Shared, finding: Finding) -> Finding:
    """A device assert on a table's bounds, with the --inputs value that broke them named."""
    assert shared.manifest is not None and shared.options.inputs is not None
    try:
        header = _safetensors.read_header(shared.options.inputs)
        named = name_the_index(finding.found or "", shared.options.inputs, header, shared.manifest.io.tensor_inputs())
    except (_safetensors.SafetensorsError, OSError):
        named = None
    if named is None:
        return finding
    return replace(finding, message=f"{named} ({finding.message})", evidence={**finding.evidence, "named": named})


def _judge(sample_id: str, reply: Mapping[str, Any], devices: Mapping[str, str] | None = None) -> list[Finding]:
    """A run's reply as findings: the output count, each output's device against ``devices`` (name
    -> where the manifest says it comes back: placement.output_devices), NaN/Inf, and its
    comparison with the reference."""
    findings: list[Finding] = []
    if "count_mismatch" in reply:
        cm = reply["count_mismatch"]
        findings.append(
            error(
                "golden.mismatch",
                "golden",
                f"sample {sample_id}: the model returned {cm['found']} output(s)",
                expected=str(cm["expected"]),
                found=str(cm["found"]),
                hint="the package does not match its manifest",
            )
        )
    for name, st in (reply.get("outputs") or {}).items():
        expected = (devices or {}).get(name)
        if expected is not None and isinstance(st.get("device"), str) and not on_device(st["device"], expected):
            findings.append(_device_finding(sample_id, name, expected, st["device"]))
        judged = _output_finding(sample_id, name, st)
        if judged is not None:
            findings.append(judged)
    return findings


def _device_finding(sample_id: str, name: str, expected: str, found: str) -> Finding:
    """``golden.output_device``: an output the model returned on another device than the manifest records."""
    return error(
        "golden.output_device",
        "golden",
        f"sample {sample_id}: output {name!r} came back on {found}; the package records {expected}",
        expected=expected,
        found=found,
        hint="the native code places this output elsewhere than the build recorded (an output left on the wrong device, "
        "pytorch#152130): a caller reading it where the package says gets an error or a silent copy; rebuild the package "
        "with the torch this host serves with",
        evidence={"sample": sample_id, "output": name},
    )


def _output_finding(sample_id: str, name: str, st: Mapping[str, Any]) -> Finding | None:
    """One output's NaN/Inf or its comparison with the reference, as the finding; None when it passed."""
    if st.get("nonfinite") and not st.get("ref_nonfinite"):
        return error(
            "run.nonfinite",
            "golden",
            f"sample {sample_id}: output {name!r} holds {st['nonfinite']} NaN/Inf value(s)"
            + ("; the reference has none" if sample_id != "inputs" else ""),
            expected="finite values",
            found=f"{st['nonfinite']} non-finite",
            hint="the escalate phase runs the debug twin to name the first kernel that produces it",
            evidence={"sample": sample_id, "output": name},
        )
    if st.get("passed") is not False:
        return None
    if st.get("reason") in ("shape", "dtype"):
        return error(
            "golden.mismatch",
            "golden",
            f"sample {sample_id}: output {name!r} has the wrong {st['reason']}",
            expected=str(st.get("expected")),
            found=str(st.get("found")),
            hint="the package does not match its manifest",
        )
    return error(
        "golden.mismatch",
        "golden",
        f"sample {sample_id}: output {name!r} differs from the reference: max abs error {st.get('max_abs')}, max rel error {st.get('max_rel')} ({st.get('mismatched')} element(s) out of tolerance)"
        + _golden_cases.stats_words(st),
        expected=_bound_words(st),
        found=f"max abs {st.get('max_abs')} at {st.get('worst_index')}",
        hint="the package computes different results on this host: check the host findings (arch, torch)",
        evidence={
            "sample": sample_id,
            "output": name,
            **{k: st.get(k) for k in ("max_abs", "max_rel", "atol", "rtol", "mismatched", "worst_index")},
        },
    )


def _bound_words(st: Mapping[str, Any]) -> str:
    """The rule an output was held to, from the child's comparison: the tolerance its sample is
    held to (its own where it has one: Golden.tolerances_of)."""
    atol, rtol = st.get("atol"), st.get("rtol")
    if isinstance(atol, (int, float)) and isinstance(rtol, (int, float)):
        return f"|out - ref| <= {atol:g} + {rtol:g}*|ref|"
    return "within tolerance"
