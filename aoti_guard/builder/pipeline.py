"""``aoti-guard build``: export, compile (release + debug twin), validate, package — one .pt2.

The build is a list of steps (``STEPS``) run in order by one loop (``runtime_probe.reporting.recorder``):
each step reads and fills a ``BuildState`` and returns its findings, or raises ``StepFailed`` to
stop the build (the steps after it are skipped). The library never prints or exits: it returns a
Report (see runtime_probe.reporting.report), and raises UsageError only for unusable arguments.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aoti_guard.builder import resources
from aoti_guard.builder import twin_step as twin_step_mod
from aoti_guard.builder.compile import aoti as compile_mod
from aoti_guard.builder.compile import native_bounds, targets, toolchain
from aoti_guard.builder.compile.constant_digests import ConstantDigests
from aoti_guard.builder.compile.constant_names import program_tensors
from aoti_guard.builder.export import contract as contract_mod
from aoti_guard.builder.export import determinism, positions, user_code
from aoti_guard.builder.export import guards as export_guards
from aoti_guard.builder.export import user_samples as user_samples_mod
from aoti_guard.builder.export.program import eager_run, export_program
from aoti_guard.builder.minify import driver as minify_mod
from aoti_guard.builder.options import PHASES, BuildOptions, ProgressFn
from aoti_guard.builder.outputs import build_paths, rejected_path
from aoti_guard.builder.package.assemble import PackageJob, assemble, summary, weightless_notes
from aoti_guard.builder.package.constant_size import oversized_constants
from aoti_guard.builder.resolve import device as device_mod
from aoti_guard.builder.resolve import training_mode
from aoti_guard.builder.resolve.binding import bind
from aoti_guard.builder.resolve.dynamic import dynamic_shapes_from_flags
from aoti_guard.builder.resolve.target import FactoryError, resolve_target, target_module
from aoti_guard.builder.state import BuildState
from aoti_guard.builder.twin import schedule as twin_mod
from aoti_guard.builder.twin_step import twin_step
from aoti_guard.builder.validate import memcheck as validate_memcheck
from aoti_guard.builder.validate import run as validate
from aoti_guard.builder.validate import tolerance as tolerance_mod
from aoti_guard.builder.validate.onnx_reference import REFERENCES
from aoti_guard.builder.validate.subject import Subject
from aoti_guard.pt2 import writer as package_mod
from aoti_guard.pt2.signing import SigningKey, load_private_key
from aoti_guard.spec import BuildSpec
from runtime_probe._version import __version__
from runtime_probe.child.worker import Worker
from runtime_probe.formats import wrapper_cpp
from runtime_probe.package.archive import sha256_file
from runtime_probe.package.manifest import MANIFEST_SCHEMA_VERSION, IOContract, Target
from runtime_probe.reporting.errors import GuardError, ToolError, UsageError
from runtime_probe.reporting.findings import Finding, error, has_errors, warning
from runtime_probe.reporting.recorder import Recorder, StepFailed, StepResult, run_steps
from runtime_probe.reporting.report import Report
from runtime_probe.runtime import layout
from runtime_probe.runtime.terminate import Terminated, signal_wins, signals_raise, terminated_finding

__all__ = ["STEPS", "BuildOptions", "BuildState", "ProgressFn", "build", "check_options"]

_ONNX_MODULES = ("onnx", "onnxscript", "onnxruntime")


def check_options(options: BuildOptions) -> None:
    """Raise UsageError for options that cannot work, before any slow work starts."""
    if not options.output.endswith(".pt2"):
        raise UsageError(
            f"output {options.output!r} does not end in .pt2", hint="torch's loader only opens files named *.pt2: use -o NAME.pt2"
        )
    folder = os.path.dirname(os.path.abspath(options.output))
    try:  # -o creates its folder, as --save-inputs does
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the output folder {folder}: {exc.strerror}", hint="choose another -o path") from None
    if not os.access(folder, os.W_OK):
        raise UsageError(f"output folder {folder} is not writable", hint="choose another -o path")
    dev = options.device
    if not (dev in ("auto", "cpu") or dev == "cuda" or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise UsageError(f"unknown device {dev!r}", hint="use auto (the factory's), cpu, cuda or cuda:N")
    if options.twin_schedule not in twin_mod.SCHEDULES:
        raise UsageError(f"unknown twin schedule {options.twin_schedule!r}", hint=f"use one of: {', '.join(twin_mod.SCHEDULES)}")
    if options.twin_weights not in twin_mod.WEIGHTS:
        raise UsageError(f"unknown twin weights {options.twin_weights!r}", hint=f"use one of: {', '.join(twin_mod.WEIGHTS)}")
    user_samples_mod.check_sources(options.samples, "--samples")  # the files alone; the contract checks them after export
    if options.golden_max_bytes < 0:
        raise UsageError("the golden size cap is negative", hint="give a size in MiB >= 0")
    tolerance_mod.check_given(options.atol, "--atol")
    tolerance_mod.check_given(options.rtol, "--rtol")
    bad = compile_mod.validate_config_keys(options.inductor_configs)
    if bad:  # before export, so a typo costs no time
        raise UsageError(f"unknown --inductor-config key(s): {', '.join(bad)}", hint="see torch._inductor.config for the option names")
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
    build_paths(target, {**vars(options)}, reports=False).check()  # nothing it writes destroys TARGET or the key
    # Loaded before the slow work: a missing or wrong key is a usage error now, not after compiling.
    if signer is None and options.sign_key is not None:
        signer = load_private_key(options.sign_key)
    if options.trace_dir:
        _set_trace_dir(options.trace_dir)
    out_path = os.path.abspath(options.output)
    recorder = Recorder(PHASES, progress)
    work = tempfile.mkdtemp(prefix=".aoti-guard-", dir=os.path.dirname(out_path))
    worker: Worker | None = None
    state: BuildState | None = None
    # SIGTERM/SIGHUP unwind through the finally below (a command line installs them for its lifetime)
    with signals_raise():
        try:
            # Started first so that its torch import overlaps with export and compile.
            # Its TMPDIR is inside the work folder: torch's loader extracts the package there, and a
            # child that crashes (or the ladder's reruns) would otherwise leave the copies behind.
            child_tmp = os.path.join(work, "child-tmp")
            os.makedirs(child_tmp)
            worker = Worker(env={"AOTI_RUNTIME_CHECK_INPUTS": "1", "TMPDIR": child_tmp})
            worker.submit("facts")
            state = BuildState(
                target, options, work, worker, out_path, signer, recorder.note, {"output": out_path, "device": options.device}
            )
            # a full disk or memory in any step: a finding; a stop signal, whatever the step made of it: terminated
            run_steps(recorder, signal_wins(resources.guarded(STEPS)), state)
            if options.minify or minify_mod.bisected_to_compiler(recorder.results):
                # asked for, or the stage bisection found the compiler (Inductor or the package)
                # departing first: then the minifier runs by itself, within AUTO_MINIFY_S
                worker.close()  # its memory is better spent on the minifier's compiles
                _minify_phase(recorder, state)
            return _report(recorder, state.extra, state.report_path or out_path)
        except Terminated as exc:  # the finally below kills every child and removes the staging folder
            recorder.abort([terminated_finding(exc, recorder.running or "cli", "build")], f"skipped: the build was terminated ({exc.name})")
            return _report(recorder, state.extra if state is not None else {}, out_path)
        finally:
            if state is not None and state.twin_child is not None:
                state.twin_child.kill()  # a build stopped before the twin phase (a failed compile, Ctrl-C, a signal)
            if state is not None and state.constant_digests is not None:
                state.constant_digests.cancel()  # done already after a package phase; else stopped
            if worker is not None:
                worker.close()
            shutil.rmtree(work, ignore_errors=True)


def _minify_phase(recorder: Recorder, st: BuildState) -> None:
    reason = minify_mod.minify_reason(recorder.results)
    if reason is None or st.ep is None or not st.configs:
        recorder.skip("minify", "no compiler failure to minify")
        return
    recorder.start("minify")
    out_dir = minify_mod.minify_dir(st.options.output)
    budget = st.options.minify_timeout_s if st.options.minify else min(st.options.minify_timeout_s, minify_mod.AUTO_MINIFY_S)
    if not st.options.minify:  # not checked before the build: a folder we may not empty is a warning now, not a usage error
        try:
            minify_mod.check_minify_dir(out_dir)
        except UsageError as exc:
            recorder.end([warning("build.minifier_failed", "minify", exc.message, hint=exc.hint)], {"dir": out_dir})
            return
    recorder.note(f"{reason}: running the AOTI minifier in {out_dir} (at most {budget:.0f}s)")
    findings, detail = minify_mod.run_minifier(st.ep, st.configs, st.work, out_dir, budget, recorder.note)
    st.extra["minify"] = detail
    recorder.end(findings, detail)


def _report(recorder: Recorder, extra: dict[str, Any], out_path: str) -> Report:
    pkg: dict[str, Any] = {"path": out_path}
    if os.path.exists(out_path) and extra.get("written"):
        pkg.update(sha256=sha256_file(out_path), bytes=os.path.getsize(out_path))
    return Report(
        kind="build",
        package=pkg,
        phases=tuple(recorder.results),
        extra=extra,
        tool_version=__version__,
        title=f"build {os.path.basename(out_path)}",
    )


def resolve_step(st: BuildState) -> StepResult:
    """The factory, the device, the dynamic dims."""
    import torch

    try:
        spec = st.target if isinstance(st.target, BuildSpec) else resolve_target(st.target)
    except FactoryError as exc:
        finding = error(
            "build.factory_failed",
            "resolve",
            str(exc),
            found="\n".join(exc.detail)[:2000] or None,
            hint=exc.hint,
            evidence={"lines": exc.detail},
        )
        raise StepFailed([finding], "the model could not be produced") from exc
    user_samples_mod.check_sources(spec.samples, "BuildSpec.samples")
    in_training = training_mode.training_dependent(spec.model)
    if in_training:  # one cause, one error, before anything exports or compiles
        finding = error(
            "build.training_mode",
            "resolve",
            training_mode.message(in_training),
            expected="model.training == False (eval mode)",
            found="model.training == True",
            hint="call model.eval() in the factory before returning the model (training mode makes Dropout and "
            "attention dropout draw noise and BatchNorm use the batch's statistics: not the model to serve)",
            evidence={"modules": in_training},
        )
        raise StepFailed([finding], "the model is in training mode")
    choice = device_mod.resolve_device(spec, st.options.device)
    spec, st.options = choice.spec, replace(st.options, device=choice.device)
    st.extra["device"] = choice.device  # the report's device is the compiled one, never "auto"
    st.spec = spec
    st.is_program = isinstance(spec.model, torch.export.ExportedProgram)
    st.eager_fn = spec.model.module() if st.is_program else spec.model
    st.binding = bind(st.eager_fn, spec.args, spec.kwargs)  # the one binding: every later reader takes it
    st.dynamic = spec.dynamic_shapes
    if st.options.dynamic:
        if st.dynamic is not None:
            raise UsageError("dynamic shapes come from both the factory and --dynamic", hint="give them in one place")
        if st.is_program:
            raise UsageError("--dynamic cannot change a saved ExportedProgram", hint="export it again with dynamic_shapes")
        st.dynamic = dynamic_shapes_from_flags(st.options.dynamic, st.binding.values(spec.args, spec.kwargs))
    st.extra["model"] = spec.label
    return [], {"model": spec.label, "saved_program": st.is_program, "device": choice.device, "device_from": choice.origin}


def export_step(st: BuildState) -> StepResult:
    """Eager outputs on the example inputs, ``torch.export``, and the I/O contract."""
    spec = st.spec
    binding = st.binding
    assert spec is not None and binding is not None  # resolve_step ran
    example_out = eager_run(st.eager_fn, spec)
    st.ep = spec.model if st.is_program else export_program(spec, st.dynamic, binding, from_flags=bool(st.options.dynamic))
    args, kwargs = st.ep.example_inputs if st.is_program else (tuple(spec.args), dict(spec.kwargs))
    st.contract = contract_mod.extract_contract(st.ep, args, kwargs, binding, dynamic_shapes=st.dynamic, eager_outputs=example_out)
    # export's shape guards (export/guards.py): recorded in the contract; an error unless accepted,
    # but the build goes on, so that validation measures what the bare package does
    guards = export_guards.read_guards(
        st.ep,
        st.contract,
        (args, kwargs),
        declared=None if st.is_program else contract_mod.declared_dim_names(binding, args, kwargs, st.dynamic),
        accept=st.options.allow_export_guards,
        seed=st.options.seed,
    )
    if guards.guards:
        st.contract = replace(st.contract, guards=guards.guards)
    st.export_guards_failed = guards.failed
    # the user's own samples against the contract now, before anything compiles: a bad one is a UsageError
    st.user_samples, rows = user_samples_mod.load_user_samples(
        [*spec.samples, *st.options.samples], st.contract, validate.example_leaves(st.ep), guards_accepted=st.options.allow_export_guards
    )
    if rows:
        st.extra["user_samples"] = rows
    st.example_outputs = example_out  # validation's eager run of the example is compared with it (eager vs itself)
    st.graph_state = determinism.scan(st.ep, None if st.is_program else spec.model)
    st.user_code = user_code.scan(st.ep)  # validation runs memcheck over user GPU code; the manifest records it
    _user_modules(st)
    training = not st.is_program and bool(getattr(spec.model, "training", False))
    # a random op in the graph: whether its draws reach the outputs, from a second eager call
    repeated = determinism.repeat(example_out, eager_run(st.eager_fn, spec)) if st.graph_state.random_ops else None
    beyond = [] if st.is_program else positions.beyond_positions(spec.model, st.contract)  # a saved program has no config
    return [*determinism.findings(st.graph_state, root_training=training, repeated=repeated), *guards.findings, *beyond], {
        "inputs": [i.name for i in st.contract.inputs],
        "outputs": [o.name for o in st.contract.outputs],
        "symbols": {s.name: [s.min, s.max] for s in st.contract.symbols},
        **guards.detail,
    }


def _user_modules(st: BuildState) -> None:
    """A program that calls custom ops: its TARGET's module (as the user wrote it, never a name read
    from the program) goes to every child that loads it, and into the build's report (not the package)."""
    module = target_module(st.target)
    if st.user_code is None or not st.user_code.custom_ops or module is None:
        return
    st.user_modules = (module,)
    st.extra["user_modules"] = {"imported": [module], "for": list(st.user_code.custom_ops)}


def compile_step(st: BuildState) -> StepResult:
    """AOT-compile the release model into a package of its own (the manifest comes later)."""
    assert st.contract is not None and st.spec is not None
    min_below_two = any(s.min < 2 for s in st.contract.symbols)
    if st.options.device.startswith("cpu"):
        st.cpu_isa = targets.default_cpu_isa(st.options.cpu_isa, compile_mod.has_config)
    st.configs = compile_mod.release_configs(
        _target_configs(st.options, st.cpu_isa), _metadata(st.contract, st.options.device), min_below_two=min_below_two
    )
    stem = os.path.splitext(os.path.basename(st.out_path))[0]
    st.release_pt2 = os.path.join(st.work, f"{stem}.pt2")
    if st.options.debug_twin and twin_mod.schedule(st.options.twin_schedule) == "concurrent":
        twin_configs = twin_step_mod.twin_configs(st)
        st.twin_child, st.twin_not_in_child = twin_mod.start_child(
            st.ep, twin_configs, twin_step_mod.twin_dir(st), twin_step_mod.twin_path(st), layout.TWIN_MODEL, st.user_modules
        )
    # the heartbeat repeats the last note for the whole phase: it names the release compile, which
    # the phase waits on, and the twin only beside it (it said only the twin's, issue 44)
    st.note(
        "compiling the release model, and the debug twin beside it in a child process"
        if st.twin_child is not None
        else "compiling the release model"
    )
    # the manifest's constant digests, hashed beside the compile (compile/constant_digests.py; the package phase takes them)
    st.constant_digests = ConstantDigests(program_tensors(st.ep))
    try:
        files = compile_mod.compile_files(st.ep, st.configs)
        package_mod.package_release(st.release_pt2, files)
    except compile_mod.CompileError as exc:
        exhausted = resources.from_exception(exc)
        if exhausted is not None:  # the machine's doing, not the compiler's
            finding = resources.finding(exhausted, "compile", f"compiling {st.spec.label}", evidence={"lines": exc.lines})
            raise StepFailed([finding], exhausted.what) from exc
        finding = error(
            "build.compile_failed",
            "compile",
            f"AOTInductor could not compile {st.spec.label}: {exc.lines[0][:300]}",
            found="\n".join(exc.lines)[:3000],
            hint=exc.hint,
            evidence={"lines": exc.lines},
        )
        raise StepFailed([finding], "compile failed") from exc
    st.release_hashes = package_mod.EntryHashes(st.release_pt2)  # the package phase takes them (package/assemble.py)
    narrowed = _narrow_to_native_checks(st)
    findings, detail = _check_targets(st)
    return narrowed + findings, {"files": len(files), **detail}


def _narrow_to_native_checks(st: BuildState) -> list[Finding]:
    """The contract's symbol ranges cut to those the compiled wrapper checks (compile/native_bounds.py)."""
    assert st.contract is not None and st.spec is not None
    with zipfile.ZipFile(st.release_pt2) as zf:
        sources = [zf.read(n).decode("utf-8", "replace") for n in zf.namelist() if n.endswith(".wrapper.cpp")]
    st.contract, findings = native_bounds.narrow_contract(st.contract, wrapper_cpp.size_checks(sources), st.spec.label)
    return findings


def _target_configs(options: BuildOptions, cpu_isa: str | None) -> dict[str, Any]:
    """The user's Inductor configs over those the CPU level (``cpu_isa``: --cpu-isa or its
    default) and --cuda-arch need (the user's win)."""
    extra: dict[str, Any] = {}
    try:
        if cpu_isa is not None and options.device.startswith("cpu"):
            extra.update(targets.cpu_isa_configs(cpu_isa, compile_mod.has_config))
    except ValueError as exc:
        hint = "docs/probe.md (Build targets) says which torch versions have the lever"
        raise StepFailed([error("build.compile_failed", "compile", str(exc), hint=hint)], "no lever") from None
    if options.cuda_archs and options.device.startswith("cuda"):
        import torch

        major, minor = torch.cuda.get_device_capability(options.device)
        extra.update(targets.cuda_arch_configs(options.cuda_archs, f"{major}{minor}"))
    return {**extra, **options.inductor_configs}


def _check_targets(st: BuildState) -> tuple[list[Finding], dict[str, Any]]:
    """After the compile: AVX-512 in a CPU .so, or listed CUDA archs no kernel image covers."""
    with zipfile.ZipFile(st.release_pt2) as zf:
        names = [n for n in zf.namelist() if "/data/aotinductor/" in n]
        if st.options.device.startswith("cpu"):
            so = layout.model_library(names)
            if so is None:
                return [], {}
            path = zf.extract(so, os.path.join(st.work, "isa-check"))
            findings, detail = targets.check_cpu_isa(st.cpu_isa, path, st.configs)
            detail["cpu_isa_given"] = st.options.cpu_isa is not None
            return findings, {"target": detail}
        if not st.options.cuda_archs:
            return [], {}
        images = toolchain.kernel_images([(n, zf.read(n)) for n in names if n.endswith((".cubin", ".fatbin"))])
    stub = Target("cuda", "", "", kernel_archs=toolchain.distinct_sass_archs(images), kernels=tuple(images))
    findings = targets.check_cuda_archs(st.options.cuda_archs, stub)
    if has_errors(findings):
        raise StepFailed(findings, "the kernels do not cover --cuda-arch")
    return findings, {"target": {"cuda_archs": list(st.options.cuda_archs), "sass": list(stub.kernel_archs)}}


def validate_step(st: BuildState) -> StepResult:
    """Compiled vs eager (and fp64, and ONNX Runtime) on every golden sample, in a child process."""
    assert st.contract is not None
    subject = Subject(
        st.ep,
        st.eager_fn,
        st.contract,
        st.configs,
        st.options,
        st.tolerance,
        graph_causes=determinism.causes(st.graph_state) if st.graph_state is not None else (),
        note=st.note,
    )
    job = validate.ValidationJob(
        subject,
        st.work,
        st.worker,
        st.release_pt2,
        example_outputs=st.example_outputs,
        user_samples=st.user_samples,
        user_modules=st.user_modules,
    )
    st.outcome = validate.run_validation(job)
    # user GPU code (or --memcheck): each golden sample once more under compute-sanitizer (validate/memcheck.py)
    st.outcome.user_code, found, checked = validate_memcheck.check(st.outcome.child_run, st.release_pt2, st.options, st.user_code, st.note)
    st.outcome.findings += found
    detail: dict[str, Any] = {
        **({"user_samples": st.extra["user_samples"]} if "user_samples" in st.extra else {}),
        "samples": [g.id for g in st.outcome.index] + [c.id for c in st.outcome.compact],  # all that reach the probe
        "golden_storage": st.outcome.storage,  # per sample: stored full, compact (how), or dropped (why)
        "coverage": st.outcome.coverage,
        "timings": st.outcome.timings,
        "table": st.outcome.table,
        "margins": st.outcome.margins,
        "memcheck": checked,
    }
    names = st.outcome.constant_names
    if names.renamed or names.unpaired or names.ambiguous:  # the package's names the program lacks, and how they were paired
        detail["constant_names"] = {"renamed": names.renamed, "unpaired": sorted(names.unpaired), "ambiguous": names.ambiguous}
    if st.outcome.eager_repeat is not None:
        detail["eager_repeat"] = st.outcome.eager_repeat
    if st.outcome.stages is not None:
        detail["stages"] = st.outcome.stages
    if st.outcome.reference is not None:
        detail["reference"] = st.outcome.reference
    return st.outcome.findings, detail


def package_step(st: BuildState) -> StepResult:
    """Append golden samples, twin and manifest (signed on request); a rejected build is kept aside."""
    assert st.contract is not None and st.outcome is not None
    failed = has_errors(st.outcome.findings) or st.export_guards_failed
    twin = st.twin_pt2 if st.outcome.twin_info is not None else None
    timings: dict[str, float] = {}  # where the phase's time goes (package/assemble.py)
    try:
        job = PackageJob(
            st.ep,
            st.options,
            st.contract,
            st.release_pt2,
            twin,
            st.outcome,
            signer=None if failed else st.signer,
            release_hashes=st.release_hashes,
            constant_digests=st.constant_digests,
        )
        manifest, signed = assemble(job, timings)
    except GuardError as exc:  # only signing raises one; never write an unsigned package where a signed one was asked for
        hint = exc.hint or "check the key and free disk space; the unsigned package was not written"
        raise StepFailed([error("build.sign_failed", "package", f"signing the package failed: {exc.message}", hint=hint)], "") from exc
    except (OSError, RuntimeError, ValueError) as exc:
        exhausted = resources.from_exception(exc)
        finding = (
            resources.finding(exhausted, "package", "writing the package")
            if exhausted is not None
            else error(
                "build.package_failed", "package", f"writing the package failed: {exc}", hint="check free disk space and permissions"
            )
        )
        raise StepFailed([finding], "") from exc
    if signed is not None:
        st.extra["signature"] = {"key_id": signed.key_id, "manifest_sha256": signed.manifest_sha256}
    final = rejected_path(st.out_path) if failed else st.out_path
    os.replace(st.release_pt2, final)
    st.extra.update(written=not failed, output=final, manifest_summary=summary(manifest))
    st.report_path = final
    notes: list[Finding] = []
    if failed:
        notes.append(
            warning(
                "build.package_failed",
                "package",
                f"{'validation failed' if has_errors(st.outcome.findings) else 'an export guard was not accepted'}: "
                f"the package was kept as {final} for inspection, not written to {st.out_path}",
                hint="do not ship it; see the validate phase" if has_errors(st.outcome.findings) else "see build.export_specialized",
            )
        )
    notes += weightless_notes(manifest)
    notes += oversized_constants(st.ep, manifest.constants, st.options.inductor_configs)
    detail: dict[str, Any] = {"path": final, "signed_by": st.extra.get("signature", {}).get("key_id")}
    if st.release_hashes is not None:
        detail["early_hashes"] = st.release_hashes.detail()  # hashed while validation ran (pt2/writer.py)
    if st.constant_digests is not None:
        detail["constant_digests"] = st.constant_digests.detail()  # hashed while the release model compiled
    detail["timings"] = timings
    return notes, detail


STEPS: tuple[tuple[str, Callable[[BuildState], StepResult]], ...] = (
    ("resolve", resolve_step),
    ("export", export_step),
    ("compile", compile_step),
    ("validate", validate_step),
    ("debug_twin", twin_step),
    ("package", package_step),
)
assert tuple(name for name, _ in STEPS) == PHASES
