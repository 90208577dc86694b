"""The probe's phases, one function each: archive, host, load, constants, golden (its own module,
probe/golden_phase.py).

Each returns (findings, detail, go_on). ``Shared`` holds what all devices share (the verified
archive and manifest), ``Device`` one device's child interpreter and what it learned
(probe/state.py); probe.py orchestrates them.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import replace
from typing import Any

from runtime_probe.child.failures import no_weights, torch_import_finding
from runtime_probe.child.worker import ChildFailure
from runtime_probe.golden import cases as _golden_cases
from runtime_probe.golden import records as _golden_records
from runtime_probe.host.rules import Requirements, check_host, parent_facts
from runtime_probe.ladder.steps import Replay
from runtime_probe.package.archive import READ_ERRORS, Archive, open_archive
from runtime_probe.package.kernel_files import kernel_file_findings
from runtime_probe.package.manifest import Manifest
from runtime_probe.package.private_copy import private_copy, tmpdir_finding
from runtime_probe.package.weights import carries_weights, check_weights, keeps_unsaved
from runtime_probe.package.wrapper import model_so_features, wrapper_facts
from runtime_probe.probe.golden_phase import golden_phase
from runtime_probe.probe.load_log import read_load_log
from runtime_probe.probe.state import Device, Phase, Shared, child_finding, replay_kind
from runtime_probe.reporting.errors import PackageRejected
from runtime_probe.reporting.findings import Finding, error, has_errors, info
from runtime_probe.runtime import layout
from runtime_probe.trust.check import check_archive

__all__ = ["Device", "Phase", "Shared", "archive_phase", "constants_phase", "golden_phase", "host_phase", "load_phase", "package_device"]


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
        problems = _golden_file(shared, archive, detail)
        findings += problems
        ok = not has_errors(problems)
    # a package that cannot run whatever the host: said here, on any host; the host phase still
    # says what else this host lacks, and no native code of the package is opened (run.py)
    unrunnable = kernel_file_findings(archive, shared.manifest)
    if unrunnable:
        shared.unrunnable = f"skipped: the package cannot run ({', '.join(dict.fromkeys(f.code for f in unrunnable))}, archive phase)"
    return findings + unrunnable, detail, ok


def _golden_file(shared: Shared, archive: Archive, detail: dict[str, Any]) -> list[Finding]:
    """The golden file written where the golden phase reads it; with --verify-only (no golden
    phase follows), the samples' records checked here, by the same code: a whole sample's tensors
    in the golden file, a compact one's recipes against the contract and the recipe rules."""
    assert shared.manifest is not None and shared.manifest.golden is not None
    shared.golden_path = os.path.join(shared.tmp, "golden.safetensors")
    with open(shared.golden_path, "wb") as fh:
        for chunk in archive.iter_chunks(shared.manifest.golden.entry):
            fh.write(chunk)
    if not shared.options.verify_only:
        return []
    problems, bad = _golden_records.file_findings(shared.manifest, shared.golden_path, "archive")
    findings = list(problems)
    if bad is not None and shared.manifest.golden.compact_samples:
        cases, invalid = _golden_cases.compact_cases(shared.manifest, shared.golden_path)
        findings += [replace(f, phase="archive") for f in invalid]
        detail["compact_samples_checked"] = [sid for sid, _ in cases]
    return findings


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


def load_phase(shared: Shared, dev: Device) -> Phase:
    assert dev.worker is not None
    model_name = shared.manifest.model_name if shared.manifest is not None else layout.RELEASE_MODEL
    mark = dev.worker.stderr.total
    try:
        reply = dev.worker.request(
            "load", shared.options.timeout_s, key="release", path=shared.path, model_name=model_name, device_index=dev.device_index
        )
    except ChildFailure as exc:
        finding = child_finding(exc, "loading the package", "load", shared)
        if finding.code not in ("load.missing_op", "load.import_failed"):  # cause and remedy known: no instrument adds to them
            dev.replay = Replay("load", replay_kind(exc))
        return [finding], {}, False
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
    if shared.options.weights is None:
        note = _references_need_weights(m)
        if note is not None:  # references made for other weights than the .so's: nothing to compare them with
            dev.golden_valid = False
            findings.append(note)
    else:
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
        check = check_weights(shared.options.weights, m.constants, keeps=keeps_unsaved(m))
        findings += check.findings
        detail["weights"] = {
            "path": os.path.abspath(shared.options.weights),
            "tensors": len(check.names),
            "same_as_build": check.same_as_build,
        }
        if has_errors(check.findings):
            return findings, detail, False  # never hand torch a file that could corrupt its heap
        dev.weights_args = {
            "weights_path": os.path.abspath(shared.options.weights),
            "device": dev.device,
            "names": check.names,
            "sources": check.sources,
        }
        if m.kept_constants is not None and not carries_weights(m):  # what no checkpoint holds, from the package
            dev.weights_args["kept_from"] = {"path": os.path.abspath(shared.path), "entry": m.kept_constants}
        try:
            dev.worker.request("load_weights", shared.options.timeout_s, key="release", **dev.weights_args)
        except ChildFailure as exc:
            dev.replay = Replay("load", replay_kind(exc))
            findings.append(child_finding(exc, "loading the weights with load_constants", "load", shared))
            return findings, detail, False
        dev.golden_valid = check.same_as_build
        if not check.same_as_build:
            findings.append(_new_weights(m))
    return findings, detail, not has_errors(findings)


def _new_weights(m: Manifest) -> Finding:
    """Weights other than those the references were made for: run, checked for NaN/Inf, not compared."""
    made_for = m.golden.references if m.golden is not None else None
    whose = f"those the references were made for ({made_for.weights})" if made_for is not None else "the build's"
    return info(
        "constants.new_weights",
        "constants",
        f"the weights differ from {whose}: the golden samples were run and checked for NaN/Inf only; "
        "their outputs were NOT compared with references, so a pass says nothing about these weights' numerics",
        hint="to compare them, make references for these weights on the build side, against this same compiled package: "
        "aoti-guard references PKG TARGET --weights FILE -o NEW.pt2 (TARGET: the factory the package was built from), "
        "then aoti-guard probe NEW.pt2 --weights FILE",
    )


def _references_need_weights(m: Manifest | None) -> Finding | None:
    """References made for weights given at load (``aoti-guard references``), and none given: the
    .so's own weights (the build's) run against references that are not theirs."""
    if m is None or m.golden is None or m.golden.references is None or not carries_weights(m):
        return None  # (a package without weights refuses to run without --weights anyway: _weightless)
    made_for = m.golden.references
    return info(
        "constants.references_need_weights",
        "constants",
        f"the golden references were made for the weights {made_for.weights} (aoti-guard references), and no --weights was "
        "given: the package's own weights (the build's) ran, checked for NaN/Inf only; their outputs were NOT compared",
        hint=f"give the weights the references were made for: --weights {made_for.weights} (or probe the package they were made from)",
    )
