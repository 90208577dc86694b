"""The ``aoti-guard`` command line: a thin layer over aoti_guard (build) and runtime_probe (probe).

Only this module prints and exits. Exit codes: 0 passed; 1 a check failed; 2 usage error; 3 the
tool itself could not run (an unexpected error is reported as a bug, with its traceback saved).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from runtime_probe._version import __version__
from runtime_probe.cli import emit_report
from runtime_probe.errors import GuardError

if TYPE_CHECKING:
    from aoti_guard.pt2.signing import SigningKey

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _progress(quiet: bool):  # type: ignore[no-untyped-def]
    def say(phase: str, event: str, seconds: float | None = None) -> None:
        if quiet:
            return
        if event == "start":
            click.echo(f"[{phase}] ...", err=True)
        elif seconds is not None:
            click.echo(f"[{phase}] {event} in {seconds:.2f}s", err=True)
        else:
            click.echo(f"[{phase}] {event}", err=True)

    return say


def _check_report_path(path: str | None, flag: str) -> None:
    if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise click.UsageError(f"{flag}: folder {os.path.dirname(os.path.abspath(path))} does not exist")


def _is_given(ctx: click.Context, name: str) -> bool:
    """Whether the user gave option ``name`` (not click's default)."""
    return ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT


def _parse_config(values: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--inductor-config {item!r}: write KEY=VALUE (e.g. max_autotune=true)")
        try:
            out[key] = json.loads(raw)  # true/false/numbers/JSON objects
        except ValueError:
            out[key] = raw  # a bare string
    return out


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="aoti-guard")
def cli() -> None:
    """Make PyTorch AOTInductor packages safe to ship.

    \b
    build    export + compile a model into one validated, self-describing .pt2
    probe    check a .pt2 on this host: archive, host, load, constants, golden outputs
    inspect  show what a .pt2 holds (manifest, models, kernels, constants)
    keygen   create an Ed25519 release key pair (KEY and KEY.pub)
    sign     sign a .pt2's manifest (which holds every entry's hash) with a release key

    Exit codes: 0 passed, 1 a check failed, 2 usage error, 3 the tool could not run.
    """


@cli.command(context_settings=CONTEXT)
@click.argument("target", required=False)
@click.option("-o", "--output", required=True, metavar="OUT.pt2", help="The package to write (must end in .pt2).")
@click.option(
    "--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N: where the model is exported, compiled and validated."
)
@click.option(
    "--dynamic",
    "dynamic",
    multiple=True,
    metavar="IN:DIM=NAME[:MIN..MAX]",
    help="A dynamic dimension, e.g. x:0=batch:1..64 (repeat; a shared NAME ties sizes together).",
)
@click.option(
    "--inductor-config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="An Inductor option for the release model (repeat), e.g. max_autotune=true.",
)
@click.option("--no-debug-twin", is_flag=True, help="Do not compile the sanitized debug twin (halves compile time and package size).")
@click.option(
    "--cpu-isa",
    type=click.Choice(["native", "x86-64-v2", "x86-64-v3", "x86-64-v4"]),
    help="CPU instruction set the package's code may use (default native: this CPU's).",
)
@click.option("--cuda-arch", "cuda_arch", metavar="CC,...", help="CUDA archs the kernels must cover, e.g. 8.0,9.0 (checked).")
@click.option("--trace-dir", type=click.Path(file_okay=False), help="Write a TORCH_TRACE here (open it with tlparse).")
@click.option("--allow-nonfinite", is_flag=True, help="Do not fail the build when an output holds NaN/Inf.")
@click.option(
    "--allow-partial-coverage",
    is_flag=True,
    help="Only warn when no golden sample reaches a dynamic dimension's minimum or maximum (default: the build fails).",
)
@click.option(
    "--golden-max-mb",
    type=click.FloatRange(min=0),
    default=16.0,
    show_default=True,
    help="Size cap for the golden samples stored in the package.",
)
@click.option("--no-fp64", is_flag=True, help="Skip the float64 reference run.")
@click.option("--atol", type=click.FloatRange(min=0), help="Absolute tolerance for compiled vs eager (default by dtype).")
@click.option("--rtol", type=click.FloatRange(min=0), help="Relative tolerance for compiled vs eager (default by dtype).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the generated golden inputs.")
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=600.0, show_default=True, help="Seconds the validation child may take per step."
)
@click.option(
    "--reference",
    type=click.Choice(["onnxruntime"]),
    help="A second reference: export to ONNX and compare eager, AOTI and ONNX Runtime on every golden sample.",
)
@click.option("--keep-onnx", metavar="PATH", help="Keep the ONNX model of --reference onnxruntime here.")
@click.option(
    "--minify",
    is_flag=True,
    help="When compilation fails or AOTI alone is wrong, run PyTorch's AOTI minifier; repro in OUT.minify/.",
)
@click.option(
    "--minify-timeout",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds the minifier may take in all.",
)
@click.option(
    "--sign-key",
    type=click.Path(dir_okay=False),
    metavar="KEY",
    help="Sign the package with this Ed25519 private key (from aoti-guard keygen); a build that cannot sign fails.",
)
@click.option("--json", "json_path", metavar="PATH", help="Write the build report as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress; the report only when the build fails.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also show the informational findings of phases that passed (a failed phase shows all of its own).",
)
def build(
    target: str | None,
    output: str,
    device: str,
    dynamic: tuple[str, ...],
    configs: tuple[str, ...],
    no_debug_twin: bool,
    trace_dir: str | None,
    allow_nonfinite: bool,
    allow_partial_coverage: bool,
    golden_max_mb: float,
    no_fp64: bool,
    atol: float | None,
    rtol: float | None,
    seed: int,
    timeout: float,
    reference: str | None,
    keep_onnx: str | None,
    minify: bool,
    minify_timeout: float,
    sign_key: str | None,
    json_path: str | None,
    quiet: bool,
    verbose: bool,
    cpu_isa: str | None = None,
    cuda_arch: str | None = None,
) -> None:
    """Export, compile, validate and package TARGET into one .pt2.

    \b
    TARGET is one of:
      path/to/file.py:func     func() returns (model, args[, kwargs[, dynamic_shapes]]) or a BuildSpec
      package.module:func      the same, imported by module name
      program.pt2              a file saved with torch.export.save
      (nothing)                the bundled example model (two inputs, dynamic batch, a buffer)

    \b
    The package holds the release model (loadable by torch.\\_inductor.aoti_load_package as is),
    a manifest (I/O contract, target, toolchain, constants, hashes), golden samples with
    tolerances, and a debug twin (NaN asserts + kernel-name printer) outside torch's load path.

    \b
    Examples:
      aoti-guard build -o model.pt2
      aoti-guard build models.py:make -o model.pt2 --dynamic x:0=batch:1..64 --json build.json
      aoti-guard build models.py:make -o model.pt2 --device cuda --inductor-config max_autotune=true
      aoti-guard build models.py:make -o model.pt2 --reference onnxruntime --minify
    """
    _check_report_path(json_path, "--json")
    from aoti_guard.builder.options import BuildOptions
    from aoti_guard.builder.pipeline import build as run_build

    options = BuildOptions(
        output=output,
        device=device,
        dynamic=dynamic,
        inductor_configs=_parse_config(configs),
        debug_twin=not no_debug_twin,
        trace_dir=trace_dir,
        allow_nonfinite=allow_nonfinite,
        allow_partial_coverage=allow_partial_coverage,
        golden_max_bytes=int(golden_max_mb * 1024 * 1024),
        fp64_reference=not no_fp64,
        atol=atol,
        rtol=rtol,
        seed=seed,
        timeout_s=timeout,
        reference=reference,
        keep_onnx=keep_onnx,
        minify=minify,
        minify_timeout_s=minify_timeout,
        sign_key=sign_key,
        cpu_isa=cpu_isa,
        cuda_archs=_cuda_archs(cuda_arch),
    )
    signer = _load_key(sign_key) if sign_key is not None else None
    report = run_build(target, options, _progress(quiet), signer=signer)
    emit_report(report, json_path=json_path, junit_path=None, verbose=verbose, quiet=quiet)
    minified = report.extra.get("minify") or {}
    if minified.get("repro"):
        click.echo(
            f"minifier: repro {minified['repro']} ({minified.get('nodes_after')} of {minified.get('nodes_before')} graph nodes)\n"
            f"  run it:   {minified.get('run_repro')}\n  minify again: {minified.get('rerun_minifier')}",
            err=True,
        )
    if report.passed and not quiet:
        click.echo(
            f"wrote {report.package['path']} ({report.package.get('bytes', 0) / 1e6:.1f} MB, sha256 {str(report.package.get('sha256', ''))[:16]}…)",
            err=True,
        )
    sys.exit(report.exit_code)


def _cuda_archs(text: str | None) -> tuple[str, ...]:
    from aoti_guard.builder.targets import parse_cuda_archs

    try:
        return parse_cuda_archs(text) if text else ()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


@cli.command(context_settings=CONTEXT)
@click.argument("package", type=click.Path(dir_okay=False))
@click.option("--device", help="cpu, cuda or cuda:N (default: the device the package was built for).")
@click.option(
    "--weights",
    type=click.Path(dir_okay=False),
    help="A .safetensors file: validated against the contract, then loaded in place of the package's constants.",
)
@click.option(
    "--inputs", type=click.Path(dir_okay=False), help="A .safetensors file of inputs (keys = input names) to run after the golden samples."
)
@click.option(
    "--inputs-device", metavar="D", help="Place --inputs on this device instead of the model's (cpu replays a caller that forgot .cuda())."
)
@click.option(
    "--public-key",
    type=click.Path(dir_okay=False),
    metavar="KEY.pub",
    help="Require a valid signature by this Ed25519 public key, checked before anything in the package is trusted.",
)
@click.option("--fast", is_flag=True, help="Pre-flight only: archive, host, load, one golden sample.")
@click.option("--all-devices", is_flag=True, help="Probe every visible GPU in parallel: one child per device, a report section per device.")
@click.option("--no-escalate", is_flag=True, help="Do not rerun a failure with more instruments.")
@click.option(
    "--escalate-timeout", type=click.FloatRange(min=1), default=600.0, show_default=True, help="Seconds the whole escalation may take."
)
@click.option("--timeout", type=click.FloatRange(min=1), default=300.0, show_default=True, help="Seconds each load or golden run may take.")
@click.option("--json", "json_path", metavar="PATH", help="Write the JSON report here.")
@click.option("--junit", "junit_path", metavar="PATH", help="Write a JUnit XML report here (a testcase per phase).")
@click.option(
    "--image",
    metavar="IMAGE",
    help="Probe inside a container of this local image (the serving image; never pulled) instead of on this host.",
)
@click.option(
    "--image-timeout",
    type=click.FloatRange(min=1),
    default=900.0,
    show_default=True,
    help="With --image: seconds the whole container may run; then it is killed and removed.",
)
@click.option(
    "--probe-source",
    type=click.Choice(["auto", "image", "local"]),
    default="auto",
    show_default=True,
    help="With --image: run the image's own runtime_probe (image), this tool's copy mounted read-only (local), "
    "or the image's own when it has one, else this tool's (auto).",
)
@click.option(
    "--image-python",
    default="python3",
    show_default=True,
    metavar="PYTHON",
    help="With --image: the interpreter in the image (a name on its PATH or an absolute path).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress; the report only when a check fails.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also show the informational findings of phases that passed (a failed phase shows all of its own).",
)
def probe(
    package: str,
    device: str | None,
    weights: str | None,
    inputs: str | None,
    inputs_device: str | None,
    public_key: str | None,
    fast: bool,
    all_devices: bool,
    no_escalate: bool,
    escalate_timeout: float,
    timeout: float,
    json_path: str | None,
    junit_path: str | None,
    image: str | None,
    image_timeout: float,
    probe_source: str,
    image_python: str,
    quiet: bool,
    verbose: bool,
) -> None:
    """Check PACKAGE on this host, in an isolated child process.

    \b
    Phases: archive (safe zip, manifest, SHA-256 of every entry, before any native code opens),
    host (device, GPU arch vs kernels, driver, torch, CPU ISA, libstdc++/glibc, memory),
    load, constants (and --weights validated BEFORE load_constants), golden (recorded samples
    run with AOTI_RUNTIME_CHECK_INPUTS=1 and compared within their tolerances; then --inputs),
    escalate (a failed load or run is rerun with strict checks, the debug twin, compute-sanitizer
    and a debugger; the native frames are classified and a safe remedy is tried and verified).

    \b
    Same checks and report as `python -m runtime_probe`, which needs only the standard library.

    \b
    With --image IMAGE the probe runs inside a container of IMAGE (docker SDK; the package mounted
    read-only, no network, GPUs requested when the package targets CUDA, removed afterwards), and
    the report gains an `image` phase: exit 1 when the image cannot serve the package (no Python,
    no torch) or the package fails there, 2 when the image is not on the engine, 3 when no engine
    answers, it has no GPU runtime, or the container ended without a report.
    """
    _check_report_path(json_path, "--json")
    _check_report_path(junit_path, "--junit")
    say = _progress(quiet)
    ctx = click.get_current_context()
    for name in ("image_timeout", "probe_source", "image_python"):
        if image is None and _is_given(ctx, name):
            raise click.UsageError(f"--{name.replace('_', '-')} only applies with --image IMAGE")
    if image is not None:
        from aoti_guard.container.probe import ImageProbeOptions, ProbeSource, probe_in_image

        for flag, given in (("--inputs", inputs), ("--inputs-device", inputs_device), ("--all-devices", all_devices)):
            if given:
                raise click.UsageError(
                    f"{flag} is not supported with --image yet: probe on the host, or inside the image with python -m runtime_probe"
                )
        image_options = ImageProbeOptions(
            image=image,
            device=device,
            weights=weights,
            fast=fast,
            timeout_s=timeout,
            escalate=not no_escalate,
            escalate_timeout_s=escalate_timeout if _is_given(ctx, "escalate_timeout") else None,
            public_key=public_key,
            container_timeout_s=image_timeout,
            probe_source=ProbeSource(probe_source),
            python=image_python,
        )
        report = probe_in_image(package, image_options, lambda phase, event: say(phase, event))
        emit_report(report, json_path=json_path, junit_path=junit_path, verbose=verbose, quiet=quiet)
        sys.exit(report.exit_code)
    from runtime_probe.probe.run import ProbeOptions
    from runtime_probe.probe.run import probe as run_probe

    options = ProbeOptions(
        device=device,
        weights=weights,
        inputs=inputs,
        inputs_device=inputs_device,
        fast=fast,
        timeout_s=timeout,
        escalate=not no_escalate,
        escalate_timeout_s=escalate_timeout,
        all_devices=all_devices,
        public_key=public_key,
    )
    report = run_probe(
        package,
        options,
        lambda phase, event: say(phase, event),
    )
    emit_report(report, json_path=json_path, junit_path=junit_path, verbose=verbose, quiet=quiet)
    sys.exit(report.exit_code)


@cli.command(context_settings=CONTEXT)
@click.argument("package", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the inspection as JSON.")
def inspect(package: str, as_json: bool) -> None:
    """Show what PACKAGE holds: manifest, models, AOTI metadata, entries, kernels, constants.

    Opens no native code. A plain AOTI package (no manifest) shows what it can and says what is missing.
    """
    from runtime_probe.inspect import inspect_package, render_inspection

    data = inspect_package(package)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(render_inspection(data), nl=False)
    sys.exit(0 if not data.get("problems") else 1)


def _load_key(path: str) -> SigningKey:
    """The private key, loaded once; its warnings (a key others can read) are printed."""
    from aoti_guard.pt2.signing import load_private_key

    key = load_private_key(path)
    for message in key.warnings:
        click.echo(f"warning: {message}", err=True)
    return key


@cli.command(context_settings=CONTEXT)
@click.argument("key", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace an existing KEY / KEY.pub.")
def keygen(key: str, force: bool) -> None:
    """Create an Ed25519 release key: the private key in KEY (mode 0600), the public key in KEY.pub.

    \b
    Keep KEY secret (a CI secret, never in the repository); ship KEY.pub with the serving image:
      aoti-guard keygen release.key
      aoti-guard build -o model.pt2 --sign-key release.key
      python -m runtime_probe model.pt2 --public-key release.key.pub
    """
    from aoti_guard.pt2.signing import generate_key

    files = generate_key(key, force=force)
    click.echo(f"wrote {files.private} (private, mode 0600) and {files.public} (public)")
    click.echo(f"key id {files.key_id}")


@cli.command(context_settings=CONTEXT)
@click.argument("package", type=click.Path(dir_okay=False))
@click.option(
    "--key", "key", required=True, type=click.Path(dir_okay=False), metavar="KEY", help="The Ed25519 private key (from aoti-guard keygen)."
)
def sign(package: str, key: str) -> None:
    """Sign PACKAGE in place with KEY (an earlier signature is replaced).

    The signature covers the manifest's exact bytes, and the manifest holds the SHA-256 of every
    other entry. The package must pass its own archive checks first (safe zip, valid manifest,
    every hash matching): a damaged package is refused (exit 1), never signed.
    """
    from aoti_guard.pt2.signing import sign_package
    from runtime_probe.errors import PackageRejected
    from runtime_probe.findings import Finding, Severity
    from runtime_probe.report import format_finding

    signing_key = _load_key(key)
    try:
        result = sign_package(package, signing_key)
    except PackageRejected as exc:
        click.echo(f"error: {exc}", err=True)
        for finding in exc.findings:
            if isinstance(finding, Finding) and finding.severity is not Severity.INFO:
                click.echo("  " + format_finding(finding).replace("\n", "\n  "), err=True)
        sys.exit(1)
    replaced = f" (replaced a signature by {result.replaced})" if result.replaced else ""
    click.echo(f"signed {result.path} with key {result.key_id}{replaced}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: maps expected errors to exit codes, and bugs to exit 3 with a saved traceback."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="aoti-guard", standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 3
    except click.ClickException as exc:  # usage errors: exit 2
        exc.show()
        return exc.exit_code
    except GuardError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except Exception:  # noqa: BLE001 - a bug in aoti-guard: keep the traceback, exit 3
        fd, path = tempfile.mkstemp(prefix="aoti-guard-crash-", suffix=".txt")
        with os.fdopen(fd, "w") as fh:
            traceback.print_exc(file=fh)
        click.echo(f"error: aoti-guard failed unexpectedly (this is a bug in aoti-guard). Traceback saved to {path}", err=True)
        click.echo(traceback.format_exc().splitlines()[-1], err=True)
        return 3
    return 0
