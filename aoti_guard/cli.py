"""The ``aoti-guard`` command line: a thin layer over aoti_guard (build) and runtime_probe (probe).

Only this module prints and exits. Exit codes: 0 passed; 1 a check failed; 2 usage error; 3 the
tool itself could not run (an unexpected error is reported as a bug, with its traceback saved).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, NoReturn

import click

from aoti_guard.build_flags import BUILD_FLAGS, build_options
from aoti_guard.builder.outputs import build_paths
from aoti_guard.container.probe import ImageProbeOptions
from aoti_guard.flags import flag_options
from aoti_guard.fleet.cli import fleet
from aoti_guard.references_cli import references
from aoti_guard.torch_noise import torch_noise_to_log, with_log
from runtime_probe._version import __version__
from runtime_probe.cli import (
    check_outputs,
    emit_report,
    error_report,
    interrupted,
    log_report_lines,
    progress_for,
    write_error_reports,
)
from runtime_probe.probe.flags import OUTPUT_FLAGS, PROBE_FLAGS, Outputs, outputs_of, probe_options
from runtime_probe.reporting.errors import GuardError, UsageError, environment_error
from runtime_probe.reporting.escaping import for_terminal
from runtime_probe.reporting.output import check_report_path, is_stdout
from runtime_probe.reporting.paths import probe_paths
from runtime_probe.reporting.progress import Progress
from runtime_probe.reporting.report import Report
from runtime_probe.runtime.terminate import Terminated
from runtime_probe.runtime.terminate import install as install_stop_signals

if TYPE_CHECKING:
    from aoti_guard.pt2.signing import SigningKey

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


_IMAGE_DEFAULTS = ImageProbeOptions(image="")  # the --image flags' defaults live in ImageProbeOptions


def _is_given(ctx: click.Context, name: str) -> bool:
    """Whether the user gave option ``name`` (not click's default)."""
    return ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="aoti-guard")
def cli() -> None:
    """Make PyTorch AOTInductor packages safe to ship.

    \b
    build    export + compile a model into one validated, self-describing .pt2
    probe    check a .pt2 on this host: archive, host, load, constants, golden outputs
    inspect  show what a .pt2 holds (manifest, models, kernels, constants)
    diff     compare two .pt2 manifests (contract, tolerances, golden, target, toolchain, constants)
    keygen   create an Ed25519 release key pair (--key KEY: KEY and KEY.pub)
    sign     sign a .pt2's manifest (which holds every entry's hash) with a release key (--key KEY)
    references  golden references for new weights against the same compiled .pt2 (a checkpoint rotation)
    fleet    probe a .pt2 on every node class through Kubernetes or Slurm; one verdict per class

    Exit codes: 0 passed, 1 a check failed, 2 usage error, 3 the tool could not run.
    """


@cli.command(context_settings=CONTEXT)
@click.argument("target", required=False)
@flag_options(BUILD_FLAGS)
@flag_options(OUTPUT_FLAGS)
def build(target: str | None, **params: Any) -> None:
    """Export, compile, validate and package TARGET into one .pt2.

    \b
    TARGET is one of:
      path/to/file.py:func     func() returns (model, args[, kwargs[, dynamic_shapes]]) or a BuildSpec
      package.module:func      the same, imported by module name
      program.pt2              a file saved with torch.export.save
      (nothing)                the bundled example model (two inputs, dynamic batch, a buffer)

    \b
    The package holds the release model (loadable by torch._inductor.aoti_load_package as is),
    a manifest (I/O contract, target, toolchain, constants, hashes), golden samples with
    tolerances, and a debug twin (NaN asserts + kernel-name printer) outside torch's load path.

    \b
    Examples:
      aoti-guard build -o model.pt2
      aoti-guard build models.py:make -o model.pt2 --dynamic x:0=batch:1..64 --json build.json
      aoti-guard build models.py:make -o model.pt2 --device cuda --inductor-config max_autotune=true
      aoti-guard build models.py:make -o model.pt2 --reference onnxruntime --minify
      aoti-guard build models.py:make -o model.pt2 --samples req1.safetensors --samples req2.safetensors
    """
    _one_key(params)
    outputs = outputs_of(params)
    paths = build_paths(target, params)
    check_outputs(outputs, paths)
    options = build_options(params)
    from aoti_guard.builder.pipeline import build as run_build

    signer = _load_key(options.sign_key) if options.sign_key is not None else None
    progress, log = progress_for(outputs), list[str]()
    try:
        with torch_noise_to_log(progress, log):
            report = run_build(target, options, progress, signer=signer)
    except KeyboardInterrupt:
        raise interrupted(progress) from None
    finally:
        progress.close()
    report = dataclasses.replace(with_log(report, log), strict=outputs.strict)
    emit_report(report, outputs, paths)
    _say_build_result(report, outputs)
    sys.exit(report.exit_code)


def _one_key(params: dict[str, Any]) -> None:
    """``build --sign-key KEY`` (before 0.2) is ``--key KEY``, as ``sign`` and ``keygen`` take it:
    still accepted, with a warning; both at once must agree."""
    old = params.pop("sign_key_deprecated", None)
    if old is None:
        return
    if params.get("sign_key") not in (None, old):
        raise click.UsageError("--sign-key (deprecated) and --key name different keys: give --key alone")
    click.echo("warning: --sign-key is deprecated: write --key KEY (the same flag as aoti-guard sign and keygen)", err=True)
    params["sign_key"] = old


def _say_build_result(report: Report, outputs: Outputs) -> None:
    minified = report.extra.get("minify") or {}
    if minified.get("repro"):
        click.echo(
            f"minifier: repro {minified['repro']} ({minified.get('nodes_after')} of {minified.get('nodes_before')} graph nodes)\n"
            f"  run it:   {minified.get('run_repro')}\n  minify again: {minified.get('rerun_minifier')}",
            err=True,
        )
    if report.passed and not outputs.quiet:
        click.echo(
            f"wrote {report.package['path']} ({report.package.get('bytes', 0) / 1e6:.1f} MB, sha256 {str(report.package.get('sha256', ''))[:16]}…)",
            err=True,
        )


@cli.command(context_settings=CONTEXT)
@click.argument("package", type=click.Path(dir_okay=False))
@flag_options(PROBE_FLAGS)
@flag_options(OUTPUT_FLAGS)
@click.option(
    "--image",
    metavar="IMAGE",
    help="Probe inside a container of this local image (the serving image; never pulled) instead of on this host.",
)
@click.option(
    "--image-timeout",
    type=click.FloatRange(min=1),
    default=_IMAGE_DEFAULTS.container_timeout_s,
    show_default=True,
    help="With --image: seconds the whole container may run; then it is killed and removed.",
)
@click.option(
    "--probe-source",
    type=click.Choice(["auto", "image", "local"]),
    default=_IMAGE_DEFAULTS.probe_source.value,
    show_default=True,
    help="With --image: run the image's own runtime_probe (image), this tool's copy mounted read-only (local), "
    "or the image's own when it has one, else this tool's (auto).",
)
@click.option(
    "--image-python",
    default=_IMAGE_DEFAULTS.python,
    show_default=True,
    metavar="PYTHON",
    help="With --image: the interpreter in the image (a name on its PATH or an absolute path).",
)
def probe(package: str, **params: Any) -> None:
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
    outputs = outputs_of(params)
    paths = probe_paths(package, params)
    check_outputs(outputs, paths)
    progress = progress_for(outputs)
    try:
        if params["image"] is not None:
            report = _probe_in_image(package, params, progress)
        else:
            from runtime_probe.probe.run import probe as run_probe

            _image_flags_need_image(params)
            report = run_probe(package, probe_options(params), progress)
        log_report_lines(report, progress)
    except KeyboardInterrupt:
        raise interrupted(progress) from None
    finally:
        progress.close()
    report = dataclasses.replace(report, strict=outputs.strict)
    emit_report(report, outputs, paths)
    sys.exit(report.exit_code)


def _image_flags_need_image(params: Mapping[str, Any]) -> None:
    ctx = click.get_current_context()
    for name in ("image_timeout", "probe_source", "image_python"):
        if _is_given(ctx, name):
            raise click.UsageError(f"--{name.replace('_', '-')} only applies with --image IMAGE")


def _probe_in_image(package: str, params: Mapping[str, Any], progress: Progress) -> Report:
    from aoti_guard.container.probe import ImageProbeOptions, ProbeSource, probe_in_image

    for flag, given in (
        ("--inputs", params["inputs"]),
        ("--inputs-device", params["inputs_device"]),
        ("--all-devices", params["all_devices"]),
        ("--iterations", params["iterations"] != 1),
        ("--duration", params["duration"] is not None),
        ("--shapes", params["shapes"]),
        ("--latency-raw", params["latency_raw"]),
        ("--save-inputs", params["save_inputs"]),
        ("--save-outputs", params["save_outputs"]),
        ("--verify-only", params["verify_only"]),
    ):
        if given:
            raise click.UsageError(
                f"{flag} is not supported with --image yet: probe on the host, or inside the image with python -m runtime_probe"
            )
    local = probe_options(params)
    image_options = ImageProbeOptions(
        image=params["image"],
        device=local.device,
        weights=local.weights,
        fast=local.fast,
        timeout_s=local.timeout_s,
        escalate=local.escalate,
        escalate_timeout_s=local.escalate_timeout_s if _is_given(click.get_current_context(), "escalate_timeout") else None,
        public_key=local.public_key,
        container_timeout_s=params["image_timeout"],
        probe_source=ProbeSource(params["probe_source"]),
        python=params["image_python"],
    )
    return probe_in_image(package, image_options, lambda phase, event: progress(phase, event))


@cli.command(context_settings=CONTEXT)
@click.argument("package", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--json",
    "json_path",
    metavar="PATH",
    is_flag=False,
    flag_value="-",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the inspection as JSON here ('-': stdout; a bare --json, deprecated, means '-').",
)
def inspect(package: str | None, json_path: str | None) -> None:
    """Show what PACKAGE holds: manifest, models, AOTI metadata, entries, kernels, constants.

    Opens no native code. A plain AOTI package (no manifest) shows what it can and says what is missing.
    Same as `runtime-probe inspect PKG` (python -m runtime_probe.inspect), which needs only the standard library.
    """
    from runtime_probe.inspect import emit_inspection

    if package is None:
        if not json_path or json_path == "-":
            raise click.UsageError("Missing argument 'PACKAGE'.")
        # `inspect --json PKG`, the form of the old --json switch: still the package, JSON on stdout
        click.echo(f"warning: --json takes a PATH now; read `--json {json_path}` as `{json_path} --json -`", err=True)
        package, json_path = json_path, "-"
    sys.exit(emit_inspection(package, json_path))


@cli.command(context_settings=CONTEXT)
@click.argument("a", metavar="A.pt2", type=click.Path(dir_okay=False))
@click.argument("b", metavar="B.pt2", type=click.Path(dir_okay=False))
@click.option(
    "--json",
    "json_path",
    metavar="PATH",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the diff as JSON here ('-': stdout).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["any", "breaking"]),
    default="any",
    show_default=True,
    help="What exits 1: any difference, or only a change that breaks callers.",
)
def diff(a: str, b: str, json_path: str | None, fail_on: str) -> None:
    """Compare two packages' manifests: what a release changes, said item by item.

    \b
    Sections: contract (inputs, outputs, dtypes, dims, ranges, guards), tolerances, golden samples,
    target (device, CPU ISA, CUDA archs), toolchain, constants (names, shapes, hashes), debug twin,
    package (signature, schema). Opens no native code and does not verify the entry hashes
    (python -m runtime_probe PKG --verify-only does).

    \b
    Each change is marked BREAKING when a caller that worked with A can fail with B (an input
    added or removed, a dtype, device or static dim changed, a size or value range narrowed);
    the rest is compatible (a range widened, tolerances, golden samples, toolchain, new values).

    \b
    Exit codes: 0 the manifests agree, 1 they differ, 2 usage error (a missing file, no manifest).
    With --fail-on breaking: 0 also when every change is compatible, 1 only for a breaking one.
      aoti-guard diff old.pt2 new.pt2
      aoti-guard diff old.pt2 new.pt2 --fail-on breaking
      aoti-guard diff old.pt2 new.pt2 --json - | jq '.changes[] | select(.section == "contract")'
    """
    from runtime_probe.diff import diff_packages, render_diff
    from runtime_probe.reporting.output import write_output
    from runtime_probe.reporting.paths import Paths, Read, Write

    if json_path:
        Paths((Read("package A", a), Read("package B", b)), (Write("--json", json_path),)).check()
        check_report_path(json_path, "--json")
    result = diff_packages(a, b, fail_on)
    if json_path:
        write_output(json_path, (json.dumps(result.to_dict(), indent=2) + "\n").encode())
    click.echo(render_diff(result), nl=False, err=json_path is not None and is_stdout(json_path))
    sys.exit(result.exit_code)


def _load_key(path: str) -> SigningKey:
    """The private key, loaded once; its warnings (a key others can read) are printed."""
    from aoti_guard.pt2.signing import load_private_key

    key = load_private_key(path)
    for message in key.warnings:
        click.echo(f"warning: {message}", err=True)
    return key


@cli.command(context_settings=CONTEXT)
@click.argument("positional", metavar="", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--key", "key", type=click.Path(dir_okay=False), metavar="KEY", help="Where to write the private key (KEY.pub: the public key)."
)
@click.option("--force", is_flag=True, help="Replace an existing KEY / KEY.pub.")
def keygen(positional: str | None, key: str | None, force: bool) -> None:
    """Create an Ed25519 release key: the private key in KEY (mode 0600), the public key in KEY.pub.

    \b
    Keep KEY secret (a CI secret, never in the repository); ship KEY.pub with the serving image.
    The private key is always --key KEY (keygen, sign, build); the verifier's is --public-key:
      aoti-guard keygen --key release.key
      aoti-guard build -o model.pt2 --key release.key
      aoti-guard sign model.pt2 --key release.key          (a package built unsigned)
      python -m runtime_probe model.pt2 --public-key release.key.pub
    """
    from aoti_guard.pt2.signing import generate_key
    from runtime_probe.reporting.escaping import for_terminal

    if positional is not None:  # `keygen KEY`, the form before --key
        if key not in (None, positional):
            raise click.UsageError("KEY and --key name different files: give --key alone")
        click.echo("warning: `keygen KEY` is deprecated: write keygen --key KEY (as sign and build take it)", err=True)
        key = positional
    if key is None:
        raise click.UsageError("Missing option '--key': where to write the private key (e.g. --key release.key)")

    files = generate_key(key, force=force)
    click.echo(f"wrote {for_terminal(files.private)} (private, mode 0600) and {for_terminal(files.public)} (public)")
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
    from runtime_probe.reporting.errors import PackageRejected
    from runtime_probe.reporting.escaping import for_terminal
    from runtime_probe.reporting.findings import Finding, Severity
    from runtime_probe.reporting.report import format_finding

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
    through = f" (through the link {for_terminal(result.link)})" if result.link else ""
    click.echo(f"signed {for_terminal(result.path)}{through} with key {result.key_id}{replaced}")
    for note in result.notes:
        click.echo(f"warning: {for_terminal(note)}", err=True)


cli.add_command(fleet)  # aoti_guard/fleet/cli.py: k8s, slurm, report
cli.add_command(references)  # aoti_guard/references_cli.py


def run() -> None:
    """The ``aoti-guard`` command (console script and ``python -m aoti_guard``): ``main``, then exit.

    The exit skips the interpreter's teardown once everything is flushed and the atexit handlers
    (logging's --log-file flush, Inductor's worker shutdown) have run: after a build, tearing down
    the modules torch, Dynamo and Inductor loaded took 2.4 s of a 34 s build of the example on
    CPU, time the user waits for nothing (docs/benchmarks.md). ``main`` itself returns, for callers
    in a Python process of their own."""
    code = main()
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """Flush, run the atexit handlers, and end the process without the interpreter's teardown."""
    import atexit

    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):  # what the handlers printed
        with suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: maps expected errors to exit codes, and bugs to exit 3 with a saved traceback.
    A build or probe that stops on an error still writes its --json/--junit report (tool.* finding)."""
    args = list(argv) if argv is not None else sys.argv[1:]
    if argv is None:  # the command itself, not a caller's Python process: SIGTERM/SIGHUP unwind like Ctrl-C
        install_stop_signals()
    try:
        cli.main(args=args, prog_name="aoti-guard", standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except Terminated as exc:  # a build or probe reports it itself; this is a signal outside them
        _say_error(f"terminated ({exc.name})")
        _error_report(args, exc)
        return 3
    except click.exceptions.Abort:
        _say_error("aborted")
        _error_report(args, GuardError("aborted"))
        return 3
    except click.ClickException as exc:  # usage errors: exit 2
        shown, said = io.StringIO(), exc.format_message()
        exc.show(file=shown)  # click's usage lines, then "Error: MESSAGE", which quotes the value given
        _say_error(shown.getvalue().replace(said, for_terminal(said)))  # a line break in the value too
        _error_report(args, UsageError(exc.format_message()))
        return exc.exit_code
    except GuardError as exc:
        _say_error(f"error: {exc}")
        _error_report(args, exc)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - a bug in aoti-guard: keep the traceback, exit 3
        machine = environment_error(exc)
        if machine is not None:  # a full disk: the machine's doing, said as such
            _say_error(f"error: {machine}")
            _error_report(args, machine)
            return machine.exit_code
        fd, path = tempfile.mkstemp(prefix="aoti-guard-crash-", suffix=".txt")
        with os.fdopen(fd, "w") as fh:
            traceback.print_exc(file=fh)
        _say_error(f"error: aoti-guard failed unexpectedly (this is a bug in aoti-guard). Traceback saved to {path}")
        _say_error(traceback.format_exc().splitlines()[-1])
        _error_report(args, exc)
        return 3
    return 0


def _say_error(text: str) -> None:
    """Every line the error handler prints, on stderr, through ``for_terminal``: the messages
    quote a caller's file (a ``--samples`` tensor's name, a TARGET path) or a package (a manifest
    key), and an escape or carriage return there must not clear the screen or print a green
    "BUILD PASSED" over the error. The handler's own line breaks are kept; one in a quoted name is
    escaped with the rest (a GuardError's text is printable already: ``GuardError``)."""
    click.echo("\n".join(for_terminal(line) for line in text.rstrip("\n").split("\n")), err=True)


def _error_report(args: Sequence[str], exc: BaseException) -> None:
    """The report of a build or probe that stopped on ``exc``, at the --json/--junit it was given."""
    if not args or args[0] not in ("build", "probe"):
        return
    command = cli.commands[args[0]]
    positional, named = _lenient_values(command, args[1:])
    if not named.get("sign_key") and named.get("sign_key_deprecated"):  # the path rule knows the key either way
        named["sign_key"] = named["sign_key_deprecated"]
    subject = named.get("output") if args[0] == "build" else positional
    paths = build_paths(positional, named) if args[0] == "build" else probe_paths(positional, named)
    outputs = Outputs(json=named.get("json"), junit=named.get("junit"), markdown=named.get("markdown"), quiet=True)
    write_error_reports(error_report(args[0], subject, exc), outputs, paths)


def _lenient_values(command: click.Command, args: Sequence[str]) -> tuple[str | None, dict[str, Any]]:
    """(first positional, every option's raw value, by click's names) of a command line click
    refused: the error report then goes where the caller asked, and the path rule still knows
    what the run reads (TARGET included)."""
    from runtime_probe.cli import lenient_values

    options = [(p.opts + p.secondary_opts, str(p.name), p.is_flag) for p in command.params if isinstance(p, click.Option)]
    return lenient_values(args, options)
