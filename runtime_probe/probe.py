"""The probe: archive -> host -> load -> constants -> golden, each phase producing findings.

Nothing native is opened before the archive phase passed (safe zip, manifest, hashes). Loading
and running happen in one child interpreter (child.Worker) that the host phase also asks for its
facts, so torch is imported once. A failing phase skips the ones that depend on it.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import __version__, layout
from ._wrapper_cpp import parse_wrapper_cpp
from .archive import READ_ERRORS, Archive, open_archive, sha256_file
from .child import ChildCrashed, ChildFailure, ChildRaised, ChildTimeout, Worker
from .errors import UsageError
from .findings import Finding, error, has_errors, info, warning
from .host import Requirements, check_host, parent_facts, parse_device
from .manifest import Manifest
from .report import PhaseResult, Report, make_phase
from .signature import PublicKey, load_public_key
from .trust import check_archive
from .weights import check_weights

__all__ = ["PHASES", "ProbeOptions", "probe"]

PHASES = ("archive", "host", "load", "constants", "golden")


@dataclass(frozen=True)
class ProbeOptions:
    """How to probe.

    Attributes:
        device: "cpu", "cuda" or "cuda:N"; None = the device the package was built for.
        weights: a safetensors file to validate and load in place of the package's constants.
        fast: the container pre-flight: archive, host, load and one golden sample.
        timeout_s: limit for each child request (load, one golden run).
        python: the interpreter the child runs (the probe's own by default).
        env: extra environment for the child.
        public_key: an Ed25519 public key file (PEM): the package must carry a valid signature by
            it, checked before the manifest is believed and before anything native is opened.
    """

    device: str | None = None
    weights: str | None = None
    fast: bool = False
    timeout_s: float = 300.0
    python: str | None = None
    env: Mapping[str, str | None] = field(default_factory=dict)
    public_key: str | None = None


ProgressFn = Callable[[str, str], None]


@dataclass
class _Ctx:
    path: str
    options: ProbeOptions
    archive: Archive | None = None
    manifest: Manifest | None = None
    device_type: str = "cpu"
    device_index: int | None = None
    worker: Worker | None = None
    host: dict[str, Any] = field(default_factory=dict)
    golden_valid: bool = True
    tmp: str = ""
    public_key: PublicKey | None = None


def probe(path: str | os.PathLike[str], options: ProbeOptions = ProbeOptions(), progress: ProgressFn | None = None) -> Report:
    """Probe a package on this host and return the report (``report.exit_code`` is 0 or 1).

    Raises:
        UsageError: the package path or an option is unusable.
    """
    fspath = os.fspath(path)
    if options.device is not None:
        try:
            parse_device(options.device)
        except ValueError:
            raise UsageError(f"unknown device {options.device!r}", hint="use cpu, cuda or cuda:N") from None
    if options.weights is not None and not os.path.isfile(options.weights):
        raise UsageError(f"no weights file {options.weights}", hint="--weights takes a .safetensors file")
    say = progress or (lambda phase, event: None)
    ctx = _Ctx(fspath, options)
    if options.public_key is not None:
        ctx.public_key = load_public_key(options.public_key)  # a bad key file is a usage error, before any work
    results: list[PhaseResult] = []
    with tempfile.TemporaryDirectory(prefix="runtime-probe-") as tmp:
        ctx.tmp = tmp
        try:
            for name, fn in (("archive", _archive), ("host", _host), ("load", _load), ("constants", _constants), ("golden", _golden)):
                say(name, "start")
                started = time.monotonic()
                findings, detail, go_on = fn(ctx)
                result = make_phase(name, time.monotonic() - started, findings, detail)
                results.append(result)
                say(name, result.status)
                if not go_on:
                    reason = f"skipped: the {name} phase failed"
                    for later in PHASES[PHASES.index(name) + 1 :]:
                        results.append(make_phase(later, 0.0, [], skipped_reason=reason))
                    break
        finally:
            if ctx.worker is not None:
                ctx.worker.close()
            if ctx.archive is not None:
                ctx.archive.close()
    package: dict[str, Any] = {"path": os.path.abspath(fspath)}
    try:
        package.update(sha256=sha256_file(fspath), bytes=os.path.getsize(fspath))
    except OSError:
        pass
    extra = {"device": f"{ctx.device_type}" + (f":{ctx.device_index}" if ctx.device_index is not None else ""), "fast": options.fast}
    if ctx.manifest is not None:
        extra["model"] = {
            "inputs": [i.name for i in ctx.manifest.io.inputs],
            "outputs": [o.name for o in ctx.manifest.io.outputs],
            "built_with": ctx.manifest.toolchain.torch,
        }
    return Report(
        kind="probe",
        package=package,
        phases=tuple(results),
        host=ctx.host,
        extra=extra,
        tool_version=__version__,
        title=f"probe {os.path.basename(fspath)}",
    )


Phase = tuple[list[Finding], dict[str, Any], bool]


def _archive(ctx: _Ctx) -> Phase:
    archive, findings = open_archive(ctx.path)
    ctx.archive = archive
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
    trust = check_archive(archive, ctx.public_key)
    ctx.manifest = trust.manifest
    findings += trust.findings
    detail.update(trust.detail)
    ok = not has_errors(findings)
    if ok:
        _start_worker(ctx)
    return findings, detail, ok


def _start_worker(ctx: _Ctx) -> None:
    device_type = _package_device(ctx)
    if ctx.options.device is not None:
        device_type, ctx.device_index = parse_device(ctx.options.device)
    ctx.device_type = device_type
    env: dict[str, str | None] = {"AOTI_RUNTIME_CHECK_INPUTS": "1", **ctx.options.env}
    ctx.worker = Worker(env=env, python=ctx.options.python)
    ctx.worker.submit("facts", device_type=device_type, device_index=ctx.device_index)


def _package_device(ctx: _Ctx) -> str:
    if ctx.manifest is not None:
        return ctx.manifest.target.device_type
    assert ctx.archive is not None
    for e in ctx.archive.model_files(layout.RELEASE_MODEL):
        if e.rel.endswith("_metadata.json"):
            try:
                meta = json.loads(ctx.archive.read(e.rel, max_bytes=1 << 20))
                return str(meta.get("AOTI_DEVICE_KEY", "cpu"))
            except (*READ_ERRORS, AttributeError, RecursionError):
                continue  # a plain package has no hashes: its files may be damaged
    return "cpu"


def _plain_requirements(ctx: _Ctx) -> Requirements:
    """What a package without a manifest needs, read from its own files."""
    assert ctx.archive is not None
    isa: tuple[str, ...] = ()
    for e in ctx.archive.model_files(layout.RELEASE_MODEL):
        if e.rel.endswith(".wrapper.cpp"):
            try:
                facts = parse_wrapper_cpp(ctx.archive.read(e.rel, max_bytes=256 * 1024 * 1024).decode("utf-8", "replace"))
            except READ_ERRORS:
                continue
            from ._cpu import flags_from_mflags

            isa = tuple(sorted(flags_from_mflags(list(facts.isa_flags))))
    return Requirements(device_type=_package_device(ctx), cpu_isa=isa, platform=None, machine=None)


def _host(ctx: _Ctx) -> Phase:
    assert ctx.worker is not None
    parent = parent_facts()
    try:
        child = ctx.worker.collect("facts", ctx.options.timeout_s)
    except ChildFailure as exc:
        return [_child_finding(exc, "importing torch in a child interpreter", "load", ctx)], {}, False
    ctx.host = {**parent, **child}
    req = Requirements.from_manifest(ctx.manifest) if ctx.manifest is not None else _plain_requirements(ctx)
    findings, ok = check_host(req, parent, child, ctx.device_type, ctx.device_index)
    detail = {"device": ctx.device_type, "torch": child.get("torch"), "python": child.get("python") or platform.python_version()}
    return findings, detail, ok


def _child_finding(exc: ChildFailure, what: str, stage: str, ctx: _Ctx) -> Finding:
    evidence: dict[str, Any] = {"stderr_tail": exc.stderr[-6000:], "stdout_tail": exc.stdout[-3000:], **exc.evidence}
    phase = "load" if stage == "load" else "golden"
    if isinstance(exc, ChildCrashed):
        sig = exc.signal or f"exit code {exc.returncode}"
        hint = "the native code crashed: see evidence.native and evidence.python_stack"
        if exc.signal == "SIGKILL":
            # Nothing in the child sends itself SIGKILL: the kernel's OOM killer (or a container's
            # memory limit, or an operator) did.
            hint = "the child was killed from outside, most often by the kernel's OOM killer: check dmesg or the container's memory limit, and the constants' size"
        if (
            ctx.manifest is not None
            and ctx.manifest.inductor_configs.get("aot_inductor.package_constants_in_so") == "False"
            and not ctx.options.weights
        ):
            hint = "this package carries no weights (built with package_constants_in_so=False): pass --weights FILE.safetensors"
        native = exc.evidence.get("native") or []
        message = f"{what}: the child process died ({sig})" + (f"; last native output: {native[-1][:300]}" if native else "")
        return error(f"{stage}.crash", phase, message, found=sig, hint=hint, evidence=evidence)
    if isinstance(exc, ChildTimeout):
        return error(
            f"{stage}.timeout",
            phase,
            f"{what}: no answer within {exc.seconds:.0f}s; the child and its children were killed",
            hint="raise --timeout, or look for a hang (a deadlock, a GPU that does not answer)",
            evidence=evidence,
        )
    assert isinstance(exc, ChildRaised)
    evidence["traceback"] = str(exc.evidence.get("traceback", ""))[-4000:]
    native = [line for line in exc.stderr.splitlines() if line.startswith("Error:") or "error" in line.lower()]
    detail = native[-1] if native else f"{exc.error_type}: {exc.message.splitlines()[0] if exc.message else ''}"
    return error(
        f"{stage}.error", phase, f"{what} raised: {detail[:500]}", hint="the native error is in evidence.stderr_tail", evidence=evidence
    )


def _load(ctx: _Ctx) -> Phase:
    assert ctx.worker is not None
    model_name = ctx.manifest.model_name if ctx.manifest is not None else layout.RELEASE_MODEL
    try:
        reply = ctx.worker.request(
            "load", ctx.options.timeout_s, key="release", path=ctx.path, model_name=model_name, device_index=ctx.device_index
        )
    except ChildFailure as exc:
        return [_child_finding(exc, "loading the package", "load", ctx)], {}, False
    ctx.host["loaded_constant_fqns"] = reply.get("constant_fqns")
    return [], {"seconds": reply.get("seconds"), "constant_fqns": reply.get("constant_fqns"), "metadata": reply.get("metadata")}, True


def _constants(ctx: _Ctx) -> Phase:
    assert ctx.worker is not None
    findings: list[Finding] = []
    loaded = ctx.host.get("loaded_constant_fqns")
    detail: dict[str, Any] = {}
    if ctx.manifest is not None and loaded is not None:
        expected = {c.fqn for c in ctx.manifest.package_constants()}
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
    if ctx.options.weights is not None:
        if ctx.manifest is None:
            findings.append(
                error(
                    "manifest.missing",
                    "constants",
                    "--weights needs the manifest's constant shapes and dtypes to validate the file first",
                    hint="build the package with aoti-guard build; loading unchecked weights can corrupt memory",
                )
            )
            return findings, detail, False
        check = check_weights(ctx.options.weights, ctx.manifest.constants)
        findings += check.findings
        detail["weights"] = {
            "path": os.path.abspath(ctx.options.weights),
            "tensors": len(check.names),
            "same_as_build": check.same_as_build,
        }
        if has_errors(check.findings):
            return findings, detail, False  # never hand torch a file that could corrupt its heap
        device = ctx.device_type + (f":{ctx.device_index}" if ctx.device_index is not None else "")
        try:
            ctx.worker.request(
                "load_weights",
                ctx.options.timeout_s,
                key="release",
                weights_path=os.path.abspath(ctx.options.weights),
                device=device,
                names=check.names,
            )
        except ChildFailure as exc:
            findings.append(_child_finding(exc, "loading the weights with load_constants", "load", ctx))
            return findings, detail, False
        ctx.golden_valid = check.same_as_build
        if not check.same_as_build:
            findings.append(
                info(
                    "constants.unexpected",
                    "constants",
                    "the weights differ from the build's: golden outputs are run and checked for NaN/Inf, not compared with the build's references",
                )
            )
    return findings, detail, not has_errors(findings)


def _golden(ctx: _Ctx) -> Phase:
    assert ctx.worker is not None and ctx.archive is not None
    m = ctx.manifest
    if m is None or m.golden is None or not m.golden.samples:
        return (
            [
                warning(
                    "golden.missing",
                    "golden",
                    "the package has no golden samples: outputs were not checked",
                    hint="build with aoti-guard build (and a golden size cap that fits the samples)",
                )
            ],
            {},
            True,
        )
    golden_path = os.path.join(ctx.tmp, "golden.safetensors")
    with open(golden_path, "wb") as fh:
        for chunk in ctx.archive.iter_chunks(m.golden.entry):
            fh.write(chunk)
    device = ctx.device_type + (f":{ctx.device_index}" if ctx.device_index is not None else "")
    tolerances = {t.output: [t.atol, t.rtol] for t in m.golden.tolerances} if ctx.golden_valid else None
    inputs = [
        {"name": i.name, "kind": i.kind, "value": i.value, "stride": list(i.tensor.stride) if i.tensor else None} for i in m.io.inputs
    ]
    findings: list[Finding] = []
    runs: list[dict[str, Any]] = []
    samples = m.golden.samples[:1] if ctx.options.fast else m.golden.samples
    for sample in samples:
        try:
            reply = ctx.worker.request(
                "run",
                ctx.options.timeout_s,
                key="release",
                golden_path=golden_path,
                sample={"id": sample.id, "inputs": sample.inputs, "outputs": sample.outputs, "symbols": sample.symbols},
                inputs=inputs,
                in_spec=m.io.in_spec,
                outputs=m.output_names(),
                device=device,
                tolerances=tolerances,
            )
        except ChildFailure as exc:
            findings.append(_child_finding(exc, f"running golden sample {sample.id}", "run", ctx))
            if isinstance(exc, ChildRaised) and ctx.device_type == "cpu":
                continue  # the child lives on; a CUDA error poisons the context, so stop there
            break
        runs.append({"sample": sample.id, "seconds": reply.get("seconds"), "outputs": reply.get("outputs")})
        findings += _judge(sample.id, reply, m)
    return findings, {"runs": runs, "compared": ctx.golden_valid}, True


def _judge(sample_id: str, reply: Mapping[str, Any], m: Manifest) -> list[Finding]:
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
                    f"sample {sample_id}: output {name!r} holds {st['nonfinite']} NaN/Inf value(s); the reference has none",
                    expected="finite values",
                    found=f"{st['nonfinite']} non-finite",
                    hint="a kernel produced NaN/Inf on this host: the escalation's debug twin names the first kernel that does",
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
            tol = m.tolerance_for(name)
            findings.append(
                error(
                    "golden.mismatch",
                    "golden",
                    f"sample {sample_id}: output {name!r} differs from the reference: max abs error {st.get('max_abs')}, max rel error {st.get('max_rel')} ({st.get('mismatched')} element(s) out of tolerance)",
                    expected=f"|out - ref| <= {tol.atol:g} + {tol.rtol:g}*|ref|" if tol else "within tolerance",
                    found=f"max abs {st.get('max_abs')} at {st.get('worst_index')}",
                    hint="the package computes different results on this host: check the host findings (arch, torch), then escalate with the debug twin",
                    evidence={
                        "sample": sample_id,
                        "output": name,
                        **{k: st.get(k) for k in ("max_abs", "max_rel", "atol", "rtol", "mismatched", "worst_index")},
                    },
                )
            )
    return findings
