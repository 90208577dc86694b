"""``aoti-guard build``: export, compile (release + debug twin), validate, package — one .pt2.

Each phase reports progress and its time, and ends as a PhaseResult; a failing phase skips the
ones after it. The library never prints or exits: it returns a Report (see runtime_probe.report),
and raises UsageError only for unusable arguments.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_probe import __version__, layout
from runtime_probe.archive import sha256_file
from runtime_probe.child import Worker
from runtime_probe.errors import GuardError, ToolError, UsageError
from runtime_probe.findings import Finding, error, warning
from runtime_probe.manifest import MANIFEST_SCHEMA_VERSION, IOContract
from runtime_probe.report import PhaseResult, Report, make_phase

from . import compile as compile_mod
from . import contract as contract_mod
from . import minify as minify_mod
from . import package as package_mod
from . import validate
from .assemble import assemble, summary
from .dynamic import dynamic_shapes_from_flags, parse_dynamic
from .reference_onnx import REFERENCES
from .signing import SigningKey, load_private_key
from .spec import BuildSpec
from .target import FactoryError, describe_exception, resolve_target

__all__ = ["BuildOptions", "ProgressFn", "build"]

ProgressFn = Callable[[str, str, float | None], None]  # (phase, "start" | "done" | "failed" | message, seconds)
PHASES = ("resolve", "export", "compile", "debug_twin", "validate", "package")  # + "minify" with --minify
_ONNX_MODULES = ("onnx", "onnxscript", "onnxruntime")


@dataclass(frozen=True)
class BuildOptions:
    """How to build. ``output`` must end in .pt2 (torch's loader insists)."""

    output: str
    device: str = "cpu"
    dynamic: tuple[str, ...] = ()
    inductor_configs: Mapping[str, Any] = field(default_factory=dict)
    debug_twin: bool = True
    trace_dir: str | None = None
    allow_nonfinite: bool = False
    golden_max_bytes: int = 16 * 1024 * 1024
    fp64_reference: bool = True
    atol: float | None = None
    rtol: float | None = None
    seed: int = 0
    timeout_s: float = 600.0
    reference: str | None = None  # "onnxruntime": a second reference for validation
    keep_onnx: str | None = None  # where to keep the exported .onnx (needs reference)
    minify: bool = False  # run the AOTI minifier on a compile failure or a compiler-suspect mismatch
    minify_timeout_s: float = 300.0
    sign_key: str | None = None  # an Ed25519 private key file: sign the package before it is written


def check_options(options: BuildOptions) -> None:
    """Raise UsageError for options that cannot work, before any slow work starts."""
    if not options.output.endswith(".pt2"):
        raise UsageError(
            f"output {options.output!r} does not end in .pt2", hint="torch's loader only opens files named *.pt2: use -o NAME.pt2"
        )
    folder = os.path.dirname(os.path.abspath(options.output))
    if not os.path.isdir(folder):
        raise UsageError(f"output folder {folder} does not exist", hint="create it first")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"output folder {folder} is not writable", hint="choose another -o path")
    dev = options.device
    if not (dev == "cpu" or dev == "cuda" or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise UsageError(f"unknown device {dev!r}", hint="use cpu, cuda or cuda:N")
    if options.golden_max_bytes < 0:
        raise UsageError("the golden size cap is negative", hint="give a size in MiB >= 0")
    parse_dynamic(options.dynamic)
    _check_reference(options)
    if options.minify:
        if options.minify_timeout_s <= 0:
            raise UsageError("the minifier timeout must be positive", hint="give --minify-timeout in seconds")
        minify_mod.check_minify_dir(minify_mod.minify_dir(options.output))


def _check_reference(options: BuildOptions) -> None:
    if options.reference is not None and options.reference not in REFERENCES:
        raise UsageError(f"unknown reference {options.reference!r}", hint=f"use one of: {', '.join(REFERENCES)}")
    if options.keep_onnx is not None:
        if options.reference is None:
            raise UsageError("--keep-onnx keeps the model of --reference onnxruntime", hint="add --reference onnxruntime")
        folder = os.path.dirname(os.path.abspath(options.keep_onnx))
        if not os.path.isdir(folder):
            raise UsageError(f"--keep-onnx: folder {folder} does not exist", hint="create it first")
        if os.path.isdir(options.keep_onnx):
            raise UsageError(f"--keep-onnx: {options.keep_onnx} is a folder", hint="give a file path, e.g. model.onnx")
    if options.reference == "onnxruntime":
        missing = [m for m in _ONNX_MODULES if importlib.util.find_spec(m) is None]
        if missing:
            raise ToolError(
                f"--reference onnxruntime needs {', '.join(missing)}, which this environment lacks",
                hint="pip install 'aoti-guard[onnx]'",
            )


class _Phases:
    """Collects phase results and reports progress."""

    def __init__(self, progress: ProgressFn | None) -> None:
        self.results: list[PhaseResult] = []
        self.progress = progress or (lambda phase, event, seconds: None)
        self._start = 0.0
        self._name = ""

    def start(self, name: str) -> None:
        self._name, self._start = name, time.monotonic()
        self.progress(name, "start", None)

    def note(self, message: str) -> None:
        self.progress(self._name, message, None)

    def end(self, findings: Sequence[Finding], detail: Mapping[str, Any] | None = None) -> PhaseResult:
        seconds = time.monotonic() - self._start
        result = make_phase(self._name, seconds, findings, detail)
        self.results.append(result)
        self.progress(self._name, "failed" if result.status == "failed" else "done", seconds)
        return result

    def skip(self, name: str, reason: str) -> None:
        self.results.append(make_phase(name, 0.0, [], skipped_reason=reason))
        self.progress(name, f"skipped: {reason}", None)

    def skip_rest(self, reason: str) -> None:
        done = {r.name for r in self.results}
        for name in PHASES:
            if name not in done:
                self.results.append(make_phase(name, 0.0, [], skipped_reason=reason))


def _set_trace_dir(trace_dir: str) -> None:
    os.makedirs(trace_dir, exist_ok=True)
    os.environ["TORCH_TRACE"] = trace_dir
    import sys

    internal = sys.modules.get("torch._logging._internal")
    if internal is not None:  # torch already imported: point its lazy handler at the folder
        handler = getattr(internal, "LOG_TRACE_HANDLER", None)
        if handler is not None:
            handler.root_dir = trace_dir
            if handler not in internal.trace_log.handlers:
                internal.trace_log.addHandler(handler)


def _to_device(spec: BuildSpec, device: str) -> BuildSpec:
    import torch
    from torch.utils import _pytree as pytree

    if device == "cpu":
        return spec
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device} but this host has no usable CUDA device", hint="build on a GPU host, or use --device cpu")
    move = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    model = spec.model.to(device) if isinstance(spec.model, torch.nn.Module) else spec.model
    return BuildSpec(
        model, tuple(pytree.tree_map(move, list(spec.args))), pytree.tree_map(move, dict(spec.kwargs)), spec.dynamic_shapes, spec.name
    )


def _metadata(contract: IOContract, device: str) -> dict[str, str]:
    """Key facts mirrored into aot_inductor.metadata (strings), readable by a C++ server."""
    import torch

    def shape(t: Any) -> str:
        return ",".join(str(d) if isinstance(d, int) else d.expr for d in t.shape)

    ins = ";".join(f"{i.name}:{i.tensor.dtype}[{shape(i.tensor)}]" for i in contract.inputs if i.tensor is not None)
    outs = ";".join(f"{o.name}:{o.tensor.dtype}[{shape(o.tensor)}]" for o in contract.outputs if o.tensor is not None)
    syms = ";".join(f"{s.name}={s.min}..{'' if s.max is None else s.max}" for s in contract.symbols)
    return {
        "aoti_guard.schema_version": MANIFEST_SCHEMA_VERSION,
        "aoti_guard.tool": f"aoti-guard {__version__}",
        "aoti_guard.device": device.split(":", 1)[0],
        "aoti_guard.inputs": ins,
        "aoti_guard.outputs": outs,
        "aoti_guard.symbols": syms,
        "aoti_guard.torch": torch.__version__,
    }


def build(
    target: str | BuildSpec | None, options: BuildOptions, progress: ProgressFn | None = None, *, signer: SigningKey | None = None
) -> Report:
    """Build, validate and package a model. Returns the build report (exit code in ``report.exit_code``).

    ``signer``: ``options.sign_key`` already loaded (the CLI loads it to print its warnings); when
    not given, the key is loaded here.

    Raises:
        UsageError: bad options or a TARGET that names nothing.
    """
    check_options(options)
    # Loaded before the slow work: a missing or wrong key is a usage error now, not after compiling.
    if signer is None and options.sign_key is not None:
        signer = load_private_key(options.sign_key)
    if options.trace_dir:
        _set_trace_dir(options.trace_dir)
    phases = _Phases(progress)
    out_path = os.path.abspath(options.output)
    work = tempfile.mkdtemp(prefix=".aoti-guard-", dir=os.path.dirname(out_path))
    worker: Worker | None = None
    extra: dict[str, Any] = {"output": out_path, "device": options.device}
    compiled = _Compiled()
    try:
        # Started first so that its torch import (and that of torch's package loader, which the
        # validate phase's load needs) overlaps with export and compile.
        worker = Worker(env={"AOTI_RUNTIME_CHECK_INPUTS": "1"})
        worker.submit("facts", preload=True)
        report = _build(target, options, phases, work, worker, out_path, extra, compiled, signer)
        if options.minify:
            worker.close()  # its memory is better spent on the minifier's compiles
            _minify_phase(phases, compiled, options, work, extra)
            report = dataclasses.replace(report, phases=tuple(phases.results), extra=dict(extra))
        return report
    finally:
        if worker is not None:
            worker.close()
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class _Compiled:
    """What the build compiled, kept for the minifier."""

    ep: Any = None
    configs: Mapping[str, Any] = field(default_factory=dict)


def _minify_phase(phases: _Phases, compiled: _Compiled, options: BuildOptions, work: str, extra: dict[str, Any]) -> None:
    reason = minify_mod.minify_reason(phases.results)
    if reason is None or compiled.ep is None:
        phases.skip("minify", "no compiler failure to minify")
        return
    phases.start("minify")
    out_dir = minify_mod.minify_dir(options.output)
    phases.note(f"{reason}: running the AOTI minifier in {out_dir} (at most {options.minify_timeout_s:.0f}s)")
    findings, detail = minify_mod.run_minifier(compiled.ep, compiled.configs, work, out_dir, options.minify_timeout_s, phases.note)
    extra["minify"] = detail
    phases.end(findings, detail)


def _report(phases: _Phases, extra: dict[str, Any], out_path: str) -> Report:
    pkg: dict[str, Any] = {"path": out_path}
    if os.path.exists(out_path) and extra.get("written"):
        pkg.update(sha256=sha256_file(out_path), bytes=os.path.getsize(out_path))
    return Report(
        kind="build",
        package=pkg,
        phases=tuple(phases.results),
        extra=extra,
        tool_version=__version__,
        title=f"build {os.path.basename(out_path)}",
    )


def _build(
    target: str | BuildSpec | None,
    options: BuildOptions,
    phases: _Phases,
    work: str,
    worker: Worker,
    out_path: str,
    extra: dict[str, Any],
    compiled: _Compiled,
    signer: SigningKey | None = None,
) -> Report:
    import torch

    # -- resolve: the factory, the device, the dynamic dims
    phases.start("resolve")
    try:
        spec = target if isinstance(target, BuildSpec) else resolve_target(target)
        spec = _to_device(spec, options.device)
    except FactoryError as exc:
        phases.end(
            [
                error(
                    "build.factory_failed",
                    "resolve",
                    str(exc),
                    found="\n".join(exc.detail)[:2000] or None,
                    hint=exc.hint,
                    evidence={"lines": exc.detail},
                )
            ]
        )
        phases.skip_rest("the model could not be produced")
        return _report(phases, extra, out_path)
    is_program = isinstance(spec.model, torch.export.ExportedProgram)
    dynamic = spec.dynamic_shapes
    if options.dynamic:
        if dynamic is not None:
            raise UsageError("dynamic shapes come from both the factory and --dynamic", hint="give them in one place")
        if is_program:
            raise UsageError("--dynamic cannot change a saved ExportedProgram", hint="export it again with dynamic_shapes")
        params = contract_mod._params(contract_mod._signature(spec.model), spec.args, spec.kwargs)
        positional = [p.name for p in params if p.kind in ("positional_only", "positional_or_keyword")]
        bound = dict(zip(positional, spec.args)) | dict(spec.kwargs)
        dynamic = dynamic_shapes_from_flags(parse_dynamic(options.dynamic), bound)
    extra["model"] = spec.label
    phases.end([], {"model": spec.label, "saved_program": is_program})

    # -- export
    phases.start("export")
    eager_fn = spec.model.module() if is_program else spec.model
    try:
        with torch.no_grad():
            example_out = eager_fn(*spec.args, **dict(spec.kwargs))
    except Exception as exc:  # noqa: BLE001
        phases.end(
            [
                error(
                    "build.eager_failed",
                    "export",
                    f"the model raised on its example inputs: {type(exc).__name__}",
                    found="\n".join(describe_exception(exc)),
                    hint="make the model run eagerly on the example inputs first",
                )
            ]
        )
        phases.skip_rest("the eager model does not run")
        return _report(phases, extra, out_path)
    if is_program:
        ep = spec.model
    else:
        try:
            ep = torch.export.export(spec.model, tuple(spec.args), dict(spec.kwargs), dynamic_shapes=dynamic)
        except Exception as exc:  # noqa: BLE001
            lines = describe_exception(exc)
            phases.end(
                [
                    error(
                        "build.export_failed",
                        "export",
                        f"torch.export could not export {spec.label}: {lines[0][:300]}",
                        found="\n".join(lines)[:3000],
                        hint=_export_hint(exc),
                        evidence={"lines": lines},
                    )
                ]
            )
            phases.skip_rest("export failed")
            return _report(phases, extra, out_path)
    args, kwargs = ep.example_inputs if is_program else (tuple(spec.args), dict(spec.kwargs))
    contract = contract_mod.extract_contract(
        ep, args, kwargs, model=spec.model if not is_program else None, dynamic_shapes=dynamic, eager_outputs=example_out
    )
    phases.end(
        [],
        {
            "inputs": [i.name for i in contract.inputs],
            "outputs": [o.name for o in contract.outputs],
            "symbols": {s.name: [s.min, s.max] for s in contract.symbols},
        },
    )

    # -- compile the release model
    phases.start("compile")
    bad = compile_mod.validate_config_keys(options.inductor_configs)
    if bad:
        raise UsageError(f"unknown --inductor-config key(s): {', '.join(bad)}", hint="see torch._inductor.config for the option names")
    min_below_two = any(s.min < 2 for s in contract.symbols)
    configs = compile_mod.release_configs(options.inductor_configs, _metadata(contract, options.device), min_below_two=min_below_two)
    stem = os.path.splitext(os.path.basename(out_path))[0]
    release_pt2 = os.path.join(work, f"{stem}.pt2")
    compiled.ep, compiled.configs = ep, configs
    try:
        files = compile_mod.compile_files(ep, configs)
        package_mod.package_release(release_pt2, files)
    except compile_mod.CompileError as exc:
        phases.end(
            [
                error(
                    "build.compile_failed",
                    "compile",
                    f"AOTInductor could not compile {spec.label}: {exc.lines[0][:300]}",
                    found="\n".join(exc.lines)[:3000],
                    hint=exc.hint,
                    evidence={"lines": exc.lines},
                )
            ]
        )
        phases.skip_rest("compile failed")
        return _report(phases, extra, out_path)
    phases.end([], {"files": len(files)})

    # -- debug twin
    phases.start("debug_twin")
    twin_pt2: str | None = None
    twin_cfg = compile_mod.twin_configs(configs)
    twin_findings: list[Finding] = []
    if options.debug_twin:
        os.makedirs(os.path.join(work, "twin"))
        twin_pt2 = os.path.join(work, "twin", f"{stem}.pt2")
        try:
            package_mod.package_release(twin_pt2, compile_mod.compile_files(ep, twin_cfg), layout.TWIN_MODEL)
        except compile_mod.CompileError as exc:
            twin_findings.append(
                warning(
                    "build.twin_failed",
                    "debug_twin",
                    f"the debug twin did not compile: {exc.lines[0][:300]}",
                    hint="the release package is still built; the probe cannot escalate to a twin",
                    evidence={"lines": exc.lines},
                )
            )
            twin_pt2 = None
        phases.end(twin_findings)
    else:
        phases.end([], {"skipped": "--no-debug-twin"})

    # -- validate
    phases.start("validate")
    outcome = validate.run_validation(ep, eager_fn, contract, configs, options, phases.note, work, worker, release_pt2, twin_pt2)
    detail = {"samples": [g.id for g in outcome.index], "twin": outcome.twin_info, "table": outcome.table}
    if outcome.reference is not None:
        detail["reference"] = outcome.reference
    phases.end(outcome.findings, detail)
    validation_failed = any(f.severity.value == "error" for f in outcome.findings)

    # -- package
    phases.start("package")
    twin = twin_pt2 if outcome.twin_info is not None else None
    try:
        manifest, signed = assemble(ep, options, contract, release_pt2, twin, outcome, None if validation_failed else signer)
    except GuardError as exc:  # only signing raises one; never write an unsigned package where a signed one was asked for
        phases.end(
            [
                error(
                    "build.sign_failed",
                    "package",
                    f"signing the package failed: {exc.message}",
                    hint=exc.hint or "check the key and free disk space; the unsigned package was not written",
                )
            ]
        )
        return _report(phases, extra, out_path)
    except (OSError, RuntimeError, ValueError) as exc:
        phases.end(
            [error("build.package_failed", "package", f"writing the package failed: {exc}", hint="check free disk space and permissions")]
        )
        return _report(phases, extra, out_path)
    notes: list[Finding] = []
    if signed is not None:
        extra["signature"] = {"key_id": signed.key_id, "manifest_sha256": signed.manifest_sha256}
    final = os.path.splitext(out_path)[0] + ".rejected.pt2" if validation_failed else out_path
    os.replace(release_pt2, final)
    extra.update(written=not validation_failed, output=final, manifest_summary=summary(manifest))
    if validation_failed:
        notes.append(
            warning(
                "build.package_failed",
                "package",
                f"validation failed: the package was kept as {final} for inspection, not written to {out_path}",
                hint="do not ship it; see the validate phase",
            )
        )
    phases.end(notes, {"path": final, "signed_by": extra.get("signature", {}).get("key_id")})
    return _report(phases, extra, out_path if not validation_failed else final)


def _export_hint(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "data-dependent" in text or "GuardOnDataDependentSymNode" in text or "Could not guard on data-dependent" in text:
        return "the model branches on tensor values: use torch.cond, or torch._check(...) to state what holds"
    if "Constraints violated" in text or "specialized" in text:
        return "a dimension you marked dynamic was specialized by the model's code: narrow the Dim range or make that dimension static"
    if "Unsupported" in text or "graph break" in text.lower():
        return (
            "torch.export cannot trace this construct; see the first lines above and rewrite that part (no .item(), no Python side effects)"
        )
    return "run torch.export.export(model, args) alone to see the full error; see the torch.export docs for fixes"
