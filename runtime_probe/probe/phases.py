"""The probe's phases, one function each: archive, host, load, constants, golden.

Each returns (findings, detail, go_on). ``Shared`` holds what all devices share (the verified
archive and manifest), ``Device`` one device's child interpreter and what it learned; probe.py
orchestrates them.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from runtime_probe import layout
from runtime_probe.child.failures import Reporter, failure_finding, no_weights, torch_import_finding
from runtime_probe.child.worker import ChildCrashed, ChildFailure, ChildRaised, ChildTimeout, Worker
from runtime_probe.errors import PackageRejected, UsageError
from runtime_probe.findings import Finding, error, has_errors, info, warning
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.golden import cases as _golden_cases
from runtime_probe.host.rules import Requirements, check_host, parent_facts
from runtime_probe.ladder.steps import Replay
from runtime_probe.package.archive import READ_ERRORS, Archive, open_archive
from runtime_probe.package.manifest import Manifest
from runtime_probe.package.private_copy import private_copy, tmpdir_finding
from runtime_probe.package.weights import check_weights
from runtime_probe.package.wrapper import model_so_features, wrapper_facts
from runtime_probe.paths import probe_paths
from runtime_probe.probe.input_values import name_the_index, value_range_findings
from runtime_probe.probe.inputs_file import InputsFileError, read_inputs_header
from runtime_probe.probe.load_log import LoadLog, read_load_log
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.probe.shapes import parse_shapes, resolve_shapes
from runtime_probe.trust.check import check_archive
from runtime_probe.trust.signature import PublicKey

__all__ = ["Device", "Phase", "Shared", "archive_phase", "constants_phase", "golden_phase", "host_phase", "load_phase", "package_device"]


@dataclass
class Shared:
    """What every device's phases share: the verified archive and its manifest."""

    path: str  # the package as given; after the archive phase, the private copy that is verified and loaded
    options: ProbeOptions
    tmp: str
    source: str = ""  # the package as given (reports, commands)
    archive: Archive | None = None
    manifest: Manifest | None = None
    golden_path: str | None = None
    public_key: PublicKey | None = None


@dataclass
class Device:
    device_type: str
    device_index: int | None
    label: str = ""
    worker: Worker | None = None
    host: dict[str, Any] = field(default_factory=dict)
    golden_valid: bool = True
    replay: Replay | None = None
    weights_args: dict[str, Any] | None = None  # how --weights was loaded, for the ladder's replays
    load_log: LoadLog | None = None  # the model .so's own [AOTI_LOAD] lines (probe/load_log.py)
    log: list[str] = field(default_factory=list)  # torch's warnings and log records from the child's stderr

    @property
    def device(self) -> str:
        return self.device_type + (f":{self.device_index}" if self.device_index is not None else "")


Phase = tuple[list[Finding], dict[str, Any], bool]


def archive_phase(shared: Shared) -> Phase:
    shared.source = shared.source or shared.path
    try:
        shared.path = private_copy(shared.source, os.path.join(shared.tmp, "package"))
    except PackageRejected as exc:  # no zip to copy (checked in place), or the package could not be read
        return [f for f in exc.findings if isinstance(f, Finding)], {}, False
    except OSError as exc:
        return [tmpdir_finding(exc, shared.tmp)], {}, False
    archive, findings = open_archive(shared.path)
    shared.archive = archive
    detail: dict[str, Any] = {}
    if archive is None:
        return findings, detail, False
    detail.update(root=archive.root, entries=len(archive.entries), models=archive.models())
    if layout.RELEASE_MODEL not in archive.models():
        findings.append(
            error(
                "archive.no_model",
                "archive",
                "the package holds no AOTInductor model named 'model'",
                expected="data/aotinductor/model/",
                found=", ".join(archive.models()) or "no model",
                hint="this is not an AOTI package (a saved ExportedProgram?); build it with aoti-guard build",
            )
        )
    # signature (with a key), manifest, its value rules, every entry's hash: trust.py's order
    trust = check_archive(archive, shared.public_key)
    shared.manifest = trust.manifest
    findings += trust.findings
    detail.update(trust.detail)
    if shared.options.inputs is not None and shared.manifest is None:
        findings.append(
            error(
                "manifest.missing",
                "archive",
                "--inputs needs the manifest's input names and contract",
                hint="build the package with aoti-guard build",
            )
        )
    ok = not has_errors(findings)
    if ok and shared.manifest is not None and shared.manifest.golden is not None:
        shared.golden_path = os.path.join(shared.tmp, "golden.safetensors")
        with open(shared.golden_path, "wb") as fh:
            for chunk in archive.iter_chunks(shared.manifest.golden.entry):
                fh.write(chunk)
        if shared.options.verify_only and shared.manifest.golden.compact_samples:
            # no golden phase follows: the compact samples' records (recipes against the contract
            # and the recipe rules, their keys in the golden file) are checked here, by the same code
            cases, invalid = _golden_cases.compact_cases(shared.manifest, shared.golden_path)
            findings += [replace(f, phase="archive") for f in invalid]
            detail["compact_samples_checked"] = [sid for sid, _ in cases]
            ok = not has_errors(findings)
    return findings, detail, ok


def package_device(archive: Archive, manifest: Manifest | None) -> str:
    """The device type a package was compiled for: the manifest's, else a plain package's metadata."""
    if manifest is not None:
        return manifest.target.device_type
    for e in archive.model_files(layout.RELEASE_MODEL):
        if e.rel.endswith("_metadata.json"):
            try:
                meta = json.loads(archive.read(e.rel, max_bytes=1 << 20))
                return str(meta.get("AOTI_DEVICE_KEY", "cpu"))
            except (*READ_ERRORS, AttributeError, RecursionError):
                continue  # a plain package has no hashes: its files may be damaged
    return "cpu"


def _plain_requirements(shared: Shared) -> Requirements:
    """What a package without a manifest needs, read from its own files."""
    assert shared.archive is not None
    isa: tuple[str, ...] = ()
    facts = wrapper_facts(shared.archive, layout.model_dir(layout.RELEASE_MODEL))
    if facts is not None:
        from runtime_probe.host.cpu import flags_from_mflags

        isa = tuple(sorted(flags_from_mflags(list(facts.isa_flags))))
    return Requirements(device_type=package_device(shared.archive, shared.manifest), cpu_isa=isa)


def _weights_entry(archive: Archive) -> bool:
    """The package ships its weights beside the .so (a weights blob or a weights folder)."""
    return any("weights" in e.rel.rsplit("/", 1)[-1] or e.rel.startswith("data/weights/") for e in archive.entries.values())


def _weightless(shared: Shared, dev: Device) -> Finding | None:
    """An error when the loaded model's constants were never set: a package built without its
    weights (package_constants_in_so=False) and no --weights. Its first call reads unset memory
    (SIGSEGV), so the golden phase must not make it. Known from the manifest, else from the
    wrapper.cpp's ``AOTInductorModelBase(..., include_weights=false)`` together with the constant
    FQNs the loaded model reports (get_constant_fqns)."""
    assert shared.archive is not None
    if shared.options.weights is not None:
        return None
    loaded = dev.host.get("loaded_constant_fqns") or []
    # a .so built by torch >= 2.14 says so itself: no "[AOTI_LOAD] load_constants" line (load_log.py)
    said = dev.load_log is not None and dev.load_log.loaded_none
    told = "; its .so printed no [AOTI_LOAD] constant load under AOTI_LOG_LOADING=1" if said else ""
    if shared.manifest is not None:
        if not no_weights(shared.manifest, False) or not (loaded or shared.manifest.package_constants()):
            return None
        source = "the manifest says it was built with aot_inductor.package_constants_in_so=False" + told
    elif said and loaded and not _weights_entry(shared.archive):
        source = "its model .so loaded no constants of its own (no [AOTI_LOAD] constant load under AOTI_LOG_LOADING=1)"
    else:
        facts = wrapper_facts(shared.archive, layout.model_dir(layout.RELEASE_MODEL))
        if facts is None or facts.include_weights is not False or not loaded or _weights_entry(shared.archive):
            return None
        source = f"its wrapper.cpp builds the model with include_weights=false ({facts.num_constants} constant(s))"
    evidence: dict[str, Any] = {"constants": sorted(loaded)[:50]}
    if dev.load_log is not None and dev.load_log.can_log:
        evidence["aoti_load"] = dev.load_log.to_detail()
    return error(
        "constants.missing",
        "constants",
        f"the package carries no weights and none were given: {source}, and the loaded model has {len(loaded)} constant(s) that were never set",
        expected=f"{len(loaded)} constant(s) loaded (--weights FILE.safetensors)",
        found="none loaded",
        hint="pass --weights FILE.safetensors (checked before load_constants), or rebuild with package_constants_in_so=True; the model was not called: its first call would read unset memory (SIGSEGV)",
        evidence=evidence,
    )


def host_phase(shared: Shared, dev: Device) -> Phase:
    assert dev.worker is not None
    parent = parent_facts()
    try:
        child = dev.worker.collect("facts", shared.options.timeout_s)
    except ChildFailure as exc:  # the package was not opened yet: torch (or the interpreter) is at fault
        return [torch_import_finding(exc, "host")], {}, False
    dev.host = {**parent, **child}
    req = Requirements.from_manifest(shared.manifest) if shared.manifest is not None else _plain_requirements(shared)
    findings, ok = check_host(req, parent, child, dev.device_type, dev.device_index)
    detail = {"device": dev.device, "torch": child.get("torch"), "python": child.get("python") or platform.python_version()}
    return findings, detail, ok


def _child_finding(exc: ChildFailure, what: str, stage: str, shared: Shared, dev: Device) -> Finding:
    rep = Reporter("load" if stage == "load" else "golden", shared.manifest, weights_given=bool(shared.options.weights))
    return failure_finding(exc, what, stage, rep)


def _replay_kind(exc: ChildFailure) -> str:
    return "crash" if isinstance(exc, ChildCrashed) else "timeout" if isinstance(exc, ChildTimeout) else "error"


def load_phase(shared: Shared, dev: Device) -> Phase:
    assert dev.worker is not None
    model_name = shared.manifest.model_name if shared.manifest is not None else layout.RELEASE_MODEL
    mark = dev.worker.stderr.total
    try:
        reply = dev.worker.request(
            "load", shared.options.timeout_s, key="release", path=shared.path, model_name=model_name, device_index=dev.device_index
        )
    except ChildFailure as exc:
        dev.replay = Replay("load", _replay_kind(exc))
        return [_child_finding(exc, "loading the package", "load", shared, dev)], {}, False
    dev.host["loaded_constant_fqns"] = reply.get("constant_fqns")
    detail = {"seconds": reply.get("seconds"), "constant_fqns": reply.get("constant_fqns"), "metadata": reply.get("metadata")}
    assert shared.archive is not None
    so = model_so_features(shared.archive, layout.model_dir(model_name))
    dev.load_log = read_load_log(dev.worker.stderr.since(mark), so, dev.worker.env)
    if dev.load_log.lines or dev.load_log.can_log:
        detail["aoti_load"] = dev.load_log.to_detail()
    return [], detail, True


def _compare_constants(m: Manifest | None, loaded: list[str] | None) -> tuple[list[Finding], dict[str, Any]]:
    """The loaded model's constant FQNs against the manifest's."""
    findings: list[Finding] = []
    detail: dict[str, Any] = {}
    if m is not None and loaded is not None:
        expected = {c.loaded_name for c in m.package_constants()}
        for fqn in sorted(expected - set(loaded)):
            findings.append(
                error(
                    "constants.missing",
                    "constants",
                    f"the loaded model has no constant {fqn!r}, which the manifest lists",
                    expected=fqn,
                    found="absent",
                    hint="the package does not match its manifest; rebuild it",
                )
            )
        for fqn in sorted(set(loaded) - expected):
            findings.append(
                error(
                    "constants.unexpected",
                    "constants",
                    f"the loaded model has a constant {fqn!r} the manifest does not list",
                    found=fqn,
                    hint="the package does not match its manifest; rebuild it",
                )
            )
        detail["checked"] = len(expected)
    return findings, detail


def constants_phase(shared: Shared, dev: Device) -> Phase:
    assert dev.worker is not None
    weightless = _weightless(shared, dev)
    if weightless is not None:
        return [weightless], {}, False
    m = shared.manifest
    findings, detail = _compare_constants(m, dev.host.get("loaded_constant_fqns"))
    if shared.options.weights is not None:
        if m is None:
            findings.append(
                error(
                    "manifest.missing",
                    "constants",
                    "--weights needs the manifest's constant shapes and dtypes to validate the file first",
                    hint="build the package with aoti-guard build; loading unchecked weights can corrupt memory",
                )
            )
            return findings, detail, False
        check = check_weights(shared.options.weights, m.constants)
        findings += check.findings
        detail["weights"] = {
            "path": os.path.abspath(shared.options.weights),
            "tensors": len(check.names),
            "same_as_build": check.same_as_build,
        }
        if has_errors(check.findings):
            return findings, detail, False  # never hand torch a file that could corrupt its heap
        dev.weights_args = {"weights_path": os.path.abspath(shared.options.weights), "device": dev.device, "names": check.names}
        try:
            dev.worker.request("load_weights", shared.options.timeout_s, key="release", **dev.weights_args)
        except ChildFailure as exc:
            dev.replay = Replay("load", _replay_kind(exc))
            findings.append(_child_finding(exc, "loading the weights with load_constants", "load", shared, dev))
            return findings, detail, False
        dev.golden_valid = check.same_as_build
        if not check.same_as_build:
            findings.append(
                info(
                    "constants.unexpected",
                    "constants",
                    "the weights differ from the build's: golden outputs are run and checked for NaN/Inf, not compared with the build's references",
                )
            )
    return findings, detail, not has_errors(findings)


def _run_args(shared: Shared, dev: Device, golden_path: str, sample: Mapping[str, Any], *, user: bool) -> dict[str, Any]:
    m = shared.manifest
    assert m is not None
    tolerances = (
        {t.output: [t.atol, t.rtol] for t in m.golden.tolerances} if (m.golden is not None and dev.golden_valid and not user) else None
    )
    inputs = [
        {"name": i.name, "kind": i.kind, "value": i.value, "stride": list(i.tensor.stride) if i.tensor else None} for i in m.io.inputs
    ]
    args: dict[str, Any] = {
        "golden_path": golden_path,
        "sample": dict(sample),
        "inputs": inputs,
        "in_spec": m.io.in_spec,
        "outputs": [o.name for o in m.io.outputs if o.tensor is not None],  # the runner returns tensors only
        "device": dev.device,
        "tolerances": tolerances,
    }
    if user:
        args.update(input_device=shared.options.inputs_device or dev.device, contract_from=os.path.abspath(shared.path))
    return args


def _replay_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The failing run's arguments for the ladder's children. The contract check is dropped: it
    passed here (a rejected input is a finding, never a replay), and each rerun would repeat it."""
    timing = ("iterations", "warmup", "duration_s")  # "resize" stays: the replay needs the same sizes
    return {k: v for k, v in args.items() if k not in ("contract_from", *timing, "save_path", "save_inputs_path")}


def _extras(shared: Shared, dev: Device, sample_id: str) -> dict[str, Any]:
    """--iterations and --save-inputs/--save-outputs for one run (a section per device: its label
    goes into the file name with --all-devices)."""
    opts = shared.options
    stem = sample_id if not opts.all_devices else f"{dev.device.replace(':', '')}.{sample_id}"
    timed = opts.iterations > 1 or opts.duration_s is not None
    out: dict[str, Any] = {"iterations": opts.iterations, "warmup": opts.warmup, "duration_s": opts.duration_s} if timed else {}
    rule = probe_paths(shared.source, vars(opts), reports=False)  # the path rule, asked again for each file
    if opts.save_inputs is not None:
        out["save_inputs_path"] = os.path.join(opts.save_inputs, f"{stem}.inputs.safetensors")
        rule.check_file("--save-inputs", out["save_inputs_path"])
    if opts.save_outputs is not None:
        out["save_path"] = os.path.join(opts.save_outputs, f"{stem}.outputs.safetensors")
        rule.check_file("--save-outputs", out["save_path"])
    return out


def golden_phase(shared: Shared, dev: Device) -> Phase:
    assert dev.worker is not None and shared.archive is not None
    m = shared.manifest
    findings: list[Finding] = []
    runs: list[dict[str, Any]] = []
    cases: list[tuple[str, dict[str, Any]]] = []
    stored: dict[str, str] = {}  # sample -> "full" | "compact"
    if m is None or m.golden is None or not (m.golden.samples or m.golden.compact_samples) or shared.golden_path is None:
        findings.append(
            warning(
                "golden.missing",
                "golden",
                "the package has no golden samples: outputs were not checked",
                hint="build with aoti-guard build (and a golden size cap that fits the samples)",
            )
        )
    else:
        samples = m.golden.samples[:1] if shared.options.fast else m.golden.samples
        compact, invalid = _golden_cases.compact_cases(m, shared.golden_path)  # checked before any child allocates
        findings += invalid
        compact = compact[: 0 if samples else 1] if shared.options.fast else compact
        stored.update({s.id: "full" for s in samples} | {sid: "compact" for sid, _ in compact})
        for s in samples:
            cases.append(
                (
                    s.id,
                    _run_args(
                        shared,
                        dev,
                        shared.golden_path,
                        {"id": s.id, "inputs": s.inputs, "outputs": s.outputs, "symbols": s.symbols},
                        user=False,
                    ),
                )
            )
        cases += [(sid, _run_args(shared, dev, shared.golden_path, sample, user=False)) for sid, sample in compact]
    if shared.options.shapes is not None:
        cases.append(("shapes", _shapes_case(shared, dev)))
    if shared.options.inputs is not None and m is not None:
        user_case, user_findings = _user_inputs(shared, dev)
        findings += user_findings
        if user_case is not None:
            cases.append(("inputs", user_case))
    for sample_id, args in cases:
        try:
            reply = dev.worker.request("run", shared.options.timeout_s, key="release", **args, **_extras(shared, dev, sample_id))
        except ChildFailure as exc:
            what = {"inputs": "the --inputs", "shapes": "the --shapes inputs"}.get(sample_id, f"golden sample {sample_id}")
            findings.append(_child_finding(exc, f"running {what}", "run", shared, dev))
            if sample_id == "inputs" and findings[-1].code == "run.device_assert":
                findings[-1] = _named_index(shared, findings[-1])
            if dev.replay is None and not any(f.code.startswith("input.") for f in findings[-1:]):
                dev.replay = Replay("run", _replay_kind(exc), _replay_args(args), sample=what)
            if isinstance(exc, ChildRaised) and dev.device_type == "cpu":
                continue  # the child lives on; a CUDA error poisons the context, so stop there
            break
        if reply.get("contract_error"):
            ce = reply["contract_error"]
            findings.append(
                error(
                    ce["code"],
                    "golden",
                    f"{'--shapes' if sample_id == 'shapes' else '--inputs'}: {ce['message']}",
                    expected=ce.get("expected"),
                    found=ce.get("found"),
                    hint=ce.get("hint") or "the inputs break the package's contract; runtime_probe.load() rejects them the same way",
                    evidence={"argument": ce.get("argument")},
                )
            )
            continue
        unchecked = _golden_cases.reply_findings(sample_id, reply)  # a compact sample that could not run
        if unchecked:
            findings += unchecked
            continue
        runs.append({"sample": sample_id, "seconds": reply.get("seconds"), "outputs": reply.get("outputs")})
        if sample_id in stored:
            runs[-1]["stored"] = stored[sample_id]
        if reply.get("latency_ms"):
            runs[-1]["latency_ms"] = reply["latency_ms"]
        new = _judge(sample_id, reply, shared.manifest)
        findings += new
        if dev.replay is None and any(f.code in ("run.nonfinite", "golden.mismatch") for f in new):
            kind = "nonfinite" if any(f.code == "run.nonfinite" for f in new) else "mismatch"
            shown = {"inputs": "the --inputs", "shapes": "the --shapes inputs"}.get(sample_id, f"golden sample {sample_id}")
            dev.replay = Replay("run", kind, _replay_args(args), sample=shown)
    detail: dict[str, Any] = {"runs": runs, "compared": dev.golden_valid}
    detail["checked"] = [_golden_cases.describe(r["sample"], r["stored"], r.get("outputs")) for r in runs if "stored" in r]
    if not cases and not has_errors(findings):  # nothing ran: not "passed"
        detail["skipped"] = "no golden samples in the package" + (", and no --inputs" if shared.options.inputs is None else "")
    return findings, detail, True


def _shapes_case(shared: Shared, dev: Device) -> dict[str, Any]:
    """--shapes: inputs at the sizes asked for, made in the child by the golden samples' generator
    from the first golden sample's values, checked against the contract before they run (a size
    outside it is a finding). A package whose samples were all over the cap (stored compact)
    gives its first compact sample: the child makes its inputs again from their recipes first."""
    m = shared.manifest
    base: dict[str, Any] = {}
    unreadable = ""
    if m is not None and m.golden is not None and shared.golden_path is not None:
        if m.golden.samples:
            base = {"inputs": dict(m.golden.samples[0].inputs)}
        else:
            compact, problems = _golden_cases.compact_cases(m, shared.golden_path)
            if compact:
                base = {"inputs": compact[0][1]["inputs"], "recipes": compact[0][1]["recipes"]}
            elif m.golden.compact_samples:
                unreadable = " it can read (" + "; ".join(f.message for f in problems)[:300] + ")"
    if not base:
        raise UsageError(
            "--shapes generates inputs from the package's golden samples, and this package has none" + unreadable,
            hint="build it with aoti-guard build, or time your own inputs with --inputs FILE.safetensors --iterations N",
        )
    assert m is not None and shared.golden_path is not None  # base is only set when both are
    sizes, symbols = resolve_shapes(parse_shapes(shared.options.shapes or ""), m.io.inputs)
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
        evidence = {"argument": exc.argument} if exc.argument is not None else {}
        return None, [error("input.count", "golden", exc.message, expected=exc.expected, found=exc.found, hint=exc.hint, evidence=evidence)]
    names = [i.name for i in shared.manifest.io.tensor_inputs()]
    findings = [warning("input.count", "golden", f"--inputs has tensors the model does not take: {', '.join(extra)}")] if extra else []
    values = value_range_findings(shared.options.inputs, header, shared.manifest.io.tensor_inputs(), "golden")
    if values:
        return None, findings + values  # never hand native code an index outside its table
    sample = {"id": "inputs", "inputs": {n: n for n in names}, "outputs": {}, "symbols": {}}
    return _run_args(shared, dev, os.path.abspath(shared.options.inputs), sample, user=True), findings


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


def _judge(sample_id: str, reply: Mapping[str, Any], m: Manifest | None) -> list[Finding]:
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
        if st.get("nonfinite") and not st.get("ref_nonfinite"):
            findings.append(
                error(
                    "run.nonfinite",
                    "golden",
                    f"sample {sample_id}: output {name!r} holds {st['nonfinite']} NaN/Inf value(s)"
                    + ("; the reference has none" if sample_id != "inputs" else ""),
                    expected="finite values",
                    found=f"{st['nonfinite']} non-finite",
                    hint="the escalate phase runs the debug twin to name the first kernel that produces it",
                    evidence={"sample": sample_id, "output": name},
                )
            )
            continue
        if st.get("passed") is False:
            if st.get("reason") in ("shape", "dtype"):
                findings.append(
                    error(
                        "golden.mismatch",
                        "golden",
                        f"sample {sample_id}: output {name!r} has the wrong {st['reason']}",
                        expected=str(st.get("expected")),
                        found=str(st.get("found")),
                        hint="the package does not match its manifest",
                    )
                )
                continue
            tol = m.tolerance_for(name) if m is not None else None
            findings.append(
                error(
                    "golden.mismatch",
                    "golden",
                    f"sample {sample_id}: output {name!r} differs from the reference: max abs error {st.get('max_abs')}, max rel error {st.get('max_rel')} ({st.get('mismatched')} element(s) out of tolerance)"
                    + _golden_cases.stats_words(st),
                    expected=f"|out - ref| <= {tol.atol:g} + {tol.rtol:g}*|ref|" if tol else "within tolerance",
                    found=f"max abs {st.get('max_abs')} at {st.get('worst_index')}",
                    hint="the package computes different results on this host: check the host findings (arch, torch)",
                    evidence={
                        "sample": sample_id,
                        "output": name,
                        **{k: st.get(k) for k in ("max_abs", "max_rel", "atol", "rtol", "mismatched", "worst_index")},
                    },
                )
            )
    return findings
