"""``python -m runtime_probe PKG`` (also the ``runtime-probe`` command): the pre-flight for serving
containers, standard library only.

Exit codes: 0 every check passed; 1 the package or host failed a check (or, with --strict, warned);
2 usage error; 3 the probe itself could not run. A report asked for with --json/--junit is written
on every exit code: when nothing could be checked it holds the error as a ``tool.*`` finding.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from runtime_probe._version import __version__
from runtime_probe.errors import GuardError, ToolError, UsageError, environment_error
from runtime_probe.findings import Finding, error
from runtime_probe.output import STDOUT, check_report_path, is_stdout
from runtime_probe.probe.flags import OUTPUT_FLAGS, PROBE_FLAGS, Outputs, add_to_parser, outputs_of, probe_options
from runtime_probe.progress import Progress
from runtime_probe.report import Report, make_phase, render_text, write_json, write_junit

__all__ = [
    "check_outputs",
    "emit_report",
    "error_report",
    "lenient_outputs",
    "log_report_lines",
    "main",
    "progress_printer",
    "report_inputs",
    "write_error_reports",
]

EPILOG = """\
examples:
  python -m runtime_probe model.pt2                 full probe on the package's own device
  python -m runtime_probe model.pt2 --fast          container pre-flight (archive, host, load, one golden run)
  python -m runtime_probe model.pt2 --device cuda:1 --json report.json
  python -m runtime_probe model.pt2 --json - | jq .exit_code      the JSON report on stdout
  python -m runtime_probe model.pt2 --weights new.safetensors
  python -m runtime_probe model.pt2 --inputs request.safetensors   replay inputs; a failure climbs the escalation ladder
  python -m runtime_probe model.pt2 --all-devices                  every visible GPU, in parallel
  python -m runtime_probe model.pt2 --public-key release.pub --strict   a release gate: signed, and no warnings

exit codes: 0 passed, 1 a check failed (--strict: or warned), 2 usage error, 3 the probe could not run
"""


def progress_printer(quiet: bool) -> Progress:
    """The progress callback both command lines use (one format; live on a terminal)."""
    return Progress(quiet=quiet)


def log_report_lines(report: Report, progress: Progress) -> None:
    """torch's warnings and log records that the run kept in the report (``extra.log``) go to
    --log-file as well; never to the terminal."""
    for line in report.extra.get("log") or []:
        progress.log_line(str(line))


def emit_report(report: Report, outputs: Outputs) -> None:
    """Write the report files first (a reader must never see them missing), then the text; the
    text goes to stderr when a report goes to stdout, so that stdout stays parseable."""
    if outputs.strict and not report.strict:
        report = dataclasses.replace(report, strict=True)
    if outputs.json:
        write_json(report, outputs.json)
    if outputs.junit:
        write_junit(report, outputs.junit)
    if not outputs.quiet or not report.passed:
        stream = sys.stderr if is_stdout(outputs.json) or is_stdout(outputs.junit) else sys.stdout
        stream.write(render_text(report, verbose=outputs.verbose))
        stream.flush()


def report_inputs(package: str | None, values: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The files a run reads, which no report may overwrite."""
    named = [("the package being checked", package)]
    for key, what in (("public_key", "the public key"), ("weights", "the --weights file"), ("inputs", "the --inputs file")):
        named.append((what, values.get(key)))
    for key, what in (("sign_key", "the signing key"), ("output", "the package being built"), ("target", "the build target")):
        value = values.get(key)
        named.append((what, value.split(":", 1)[0] if key == "target" and value else value))
    return named


def check_outputs(outputs: Outputs, inputs: Iterable[tuple[str, str | None]]) -> None:
    if outputs.json == STDOUT and outputs.junit == STDOUT:
        raise UsageError("--json - and --junit - both ask for stdout", hint="send one of them to a file")
    listed = list(inputs)
    check_report_path(outputs.json, "--json", listed)
    check_report_path(outputs.junit, "--junit", listed)
    check_report_path(outputs.log_file, "--log-file", listed)


def error_report(kind: str, package: str | None, exc: BaseException) -> Report:
    """A report that holds only the error that stopped the run (usage: exit 2; tool or bug: 3)."""
    finding: Finding
    if isinstance(exc, UsageError):
        finding = error("tool.usage", "cli", exc.message, hint=exc.hint)
    elif isinstance(exc, GuardError):
        finding = error("tool.failed", "cli", exc.message, hint=exc.hint)
    else:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        finding = error("tool.bug", "cli", f"{kind} failed unexpectedly (a bug)", evidence={"exception": last})
    return Report(
        kind=kind, package={"path": package} if package else {}, phases=(make_phase("cli", 0.0, [finding]),), tool_version=__version__
    )


def write_error_reports(report: Report, outputs: Outputs, inputs: Iterable[tuple[str, str | None]]) -> None:
    """Best effort: write the error report to each report path that is itself usable."""
    listed = list(inputs)
    for path, flag, write in ((outputs.json, "--json", write_json), (outputs.junit, "--junit", write_junit)):
        if not path:
            continue
        try:
            check_report_path(path, flag, listed)
            write(report, path)
        except GuardError:
            continue  # the path is what failed: there is nowhere to put the report


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise (so a report can still be written), not exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m runtime_probe",
        description="Check an AOTInductor package (.pt2) on this host before serving it: archive safety and hashes, "
        "host compatibility (device, GPU arch, driver, torch, CPU ISA, C++ runtime), loading in an isolated child, "
        "constants, and the golden samples the build recorded.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("package", metavar="PKG", help="the .pt2 package")
    add_to_parser(p, PROBE_FLAGS)
    add_to_parser(p, OUTPUT_FLAGS)
    p.add_argument("--version", action="version", version=f"runtime_probe {__version__}")
    return p


def lenient_outputs(argv: Sequence[str]) -> tuple[str | None, dict[str, Any], Outputs]:
    """(first positional, the input files named, report flags) from a command line that did not
    parse, so that the error can still be reported where the caller asked, and never over an input."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("-o", "--output")
    for flag in ("--json", "--junit", "--public-key", "--weights", "--inputs", "--sign-key"):
        p.add_argument(flag)
    known, rest = p.parse_known_args(argv)
    positional = next((a for a in rest if not a.startswith("-")), None)
    return positional, vars(known), Outputs(json=known.json, junit=known.junit, quiet=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        values = vars(parser.parse_args(args))
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        package, named, outputs = lenient_outputs(args)
        write_error_reports(error_report("probe", package, exc), outputs, report_inputs(package, named))
        return 2
    return run_guarded("probe", values["package"], values, lambda: _probe(values))


def run_guarded(kind: str, package: str | None, values: dict[str, Any], body: Callable[[], int]) -> int:
    """Run ``body``; an expected error or a bug still leaves a report at --json/--junit."""
    outputs = outputs_of(values)
    try:
        return body()
    except GuardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        write_error_reports(error_report(kind, package, exc), outputs, report_inputs(package, values))
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        write_error_reports(error_report(kind, package, ToolError("interrupted")), outputs, report_inputs(package, values))
        return 3
    except Exception as exc:  # noqa: BLE001 - a bug of ours: say so, keep the traceback, exit 3
        machine = environment_error(exc)
        if machine is not None:  # a full disk: the machine's doing, said as such
            print(f"error: {machine}", file=sys.stderr)
            write_error_reports(error_report(kind, package, machine), outputs, report_inputs(package, values))
            return machine.exit_code
        print(f"error: {kind} failed unexpectedly (this is a bug in runtime_probe):", file=sys.stderr)
        traceback.print_exc()
        write_error_reports(error_report(kind, package, exc), outputs, report_inputs(package, values))
        return 3


def _probe(values: dict[str, Any]) -> int:
    from runtime_probe.probe.run import probe

    package = values["package"]
    outputs = outputs_of(values)
    check_outputs(outputs, report_inputs(package, values))
    options = probe_options(values)
    progress = Progress(quiet=outputs.quiet, log=outputs.log_file)
    try:
        report = probe(package, options, progress)
        log_report_lines(report, progress)
    finally:
        progress.close()
    emit_report(report, outputs)
    return report.exit_code if not outputs.strict else dataclasses.replace(report, strict=True).exit_code


if __name__ == "__main__":
    sys.exit(main())
