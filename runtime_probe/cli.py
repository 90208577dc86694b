"""``python -m runtime_probe PKG`` (also the ``runtime-probe`` command): the pre-flight for serving
containers, standard library only.

Exit codes: 0 every check passed; 1 the package or host failed a check (or, with --strict, warned);
2 usage error; 3 the probe itself could not run. A report asked for with --json/--junit is written
on every exit code: when nothing could be checked it holds the error as a ``tool.*`` finding.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from runtime_probe._version import __version__
from runtime_probe.probe.flags import OUTPUT_FLAGS, PROBE_FLAGS, Outputs, add_to_parser, outputs_of, probe_options
from runtime_probe.reporting.errors import GuardError, ToolError, UsageError, environment_error
from runtime_probe.reporting.findings import EXIT_CODES, Finding, error
from runtime_probe.reporting.markdown import append_step_summary, render_markdown
from runtime_probe.reporting.output import check_report_path, is_stdout, write_output
from runtime_probe.reporting.paths import Paths, probe_paths
from runtime_probe.reporting.progress import Progress, is_live_terminal
from runtime_probe.reporting.report import Report, make_phase, render_text, write_json, write_junit
from runtime_probe.runtime.terminate import Terminated, terminated_finding
from runtime_probe.runtime.terminate import install as install_stop_signals

__all__ = [
    "check_outputs",
    "emit_report",
    "error_report",
    "interrupted",
    "lenient_values",
    "log_report_lines",
    "main",
    "progress_for",
    "progress_printer",
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

  python -m runtime_probe model.pt2 --verify-only --public-key release.pub   archive, hashes, signature, manifest: no torch
  runtime-probe inspect model.pt2 [--json PATH|-]                  what the package holds (python -m runtime_probe.inspect)

exit codes: 0 passed, 1 a check failed (--strict: or warned), 2 usage error, 3 the probe could not run
"""


def progress_printer(quiet: bool) -> Progress:
    """The progress callback both command lines use (one format; live on a terminal)."""
    return Progress(quiet=quiet)


def interrupted(progress: Progress) -> ToolError:
    """The error for Ctrl-C during a run: it names the phase that was running."""
    phase = progress.running
    where = f" during the {phase} phase" if phase else ""
    return ToolError(
        f"interrupted (Ctrl-C){where}", hint="its child processes were killed and its temporary files removed; rerun it to finish"
    )


def progress_for(outputs: Outputs) -> Progress:
    """The run's progress lines. When the text report will follow on the same terminal, an ended
    phase's live line is erased: the report's table shows each phase once."""
    report_stream = sys.stderr if is_stdout(outputs.json) or is_stdout(outputs.junit) or is_stdout(outputs.markdown) else sys.stdout
    on_terminal = is_live_terminal(report_stream) and is_live_terminal(sys.stderr)
    return Progress(quiet=outputs.quiet, log=outputs.log_file, transient=on_terminal)


def log_report_lines(report: Report, progress: Progress) -> None:
    """torch's warnings and log records that the run kept in the report (``extra.log``) go to
    --log-file as well; never to the terminal."""
    for line in report.extra.get("log") or []:
        progress.log_line(str(line))


def emit_report(report: Report, outputs: Outputs, paths: Paths | None = None) -> None:
    """Write the report files first (a reader must never see them missing), then the text; the
    text goes to stderr when a report goes to stdout, so that stdout stays parseable. ``paths``:
    the run's path rule (runtime_probe/reporting/paths.py), asked again here: a report goes only where it
    destroys nothing."""
    if outputs.strict and not report.strict:
        report = dataclasses.replace(report, strict=True)
    if outputs.json and (paths is None or paths.usable("--json")):
        write_json(report, outputs.json)
    if outputs.junit and (paths is None or paths.usable("--junit")):
        write_junit(report, outputs.junit)
    if outputs.markdown and (paths is None or paths.usable("--markdown")):
        write_output(outputs.markdown, render_markdown(report).encode())
    append_step_summary(report, paths)
    if not outputs.quiet or not report.passed:
        on_stdout = is_stdout(outputs.json) or is_stdout(outputs.junit) or is_stdout(outputs.markdown)
        stream = sys.stderr if on_stdout else sys.stdout
        stream.write(render_text(report, verbose=outputs.verbose))
        stream.flush()


def check_outputs(outputs: Outputs, paths: Paths) -> None:
    """Before any work: no output destroys a file the run reads or another output (``paths``),
    and each report's folder exists."""
    paths.check()
    check_report_path(outputs.json, "--json")
    check_report_path(outputs.junit, "--junit")
    check_report_path(outputs.markdown, "--markdown")
    check_report_path(outputs.log_file, "--log-file")


def error_report(kind: str, package: str | None, exc: BaseException) -> Report:
    """A report that holds only the error that stopped the run (usage: exit 2; tool or bug: 3)."""
    finding: Finding
    if isinstance(exc, Terminated):
        finding = terminated_finding(exc, "cli", kind)
    elif isinstance(exc, UsageError):
        finding = error("tool.usage", "cli", exc.message, hint=exc.hint)
    elif isinstance(exc, ToolError) and exc.code is not None and EXIT_CODES.get(exc.code, 1) == exc.exit_code:
        finding = error(exc.code, "cli", exc.message, hint=exc.hint)
    elif isinstance(exc, GuardError):
        finding = error("tool.failed", "cli", exc.message, hint=exc.hint)
    else:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        finding = error("tool.bug", "cli", f"{kind} failed unexpectedly (a bug)", evidence={"exception": last})
    return Report(
        kind=kind, package={"path": package} if package else {}, phases=(make_phase("cli", 0.0, [finding]),), tool_version=__version__
    )


def write_error_reports(report: Report, outputs: Outputs, paths: Paths) -> None:
    """Best effort: write the error report to each report path the path rule allows (``paths``:
    never over a file the run reads or another output, also when that is what the error was)."""

    def write_markdown(report: Report, path: str) -> None:
        write_output(path, render_markdown(report).encode())

    append_step_summary(report, paths)
    writers = (
        (outputs.json, "--json", write_json),
        (outputs.junit, "--junit", write_junit),
        (outputs.markdown, "--markdown", write_markdown),
    )
    for path, flag, write in writers:
        if not path or not paths.usable(flag):
            continue
        try:
            check_report_path(path, flag)
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


LenientOption = tuple[Sequence[str], str, bool]  # (its names, its dest, whether it is a switch)


def lenient_values(argv: Sequence[str], options: Sequence[LenientOption] | None = None) -> tuple[str | None, dict[str, Any]]:
    """(first positional, every option's raw value) from a command line that did not parse, read
    with the command's own options (so a flag's value is never taken for the positional): the
    error can still be reported where the caller asked, and never over a file the run reads."""
    if options is None:
        options = [(([f.short] if f.short else []) + [f.name], f.dest, f.kind == "switch") for f in (*PROBE_FLAGS, *OUTPUT_FLAGS)]
    p = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    p.add_argument("positional", nargs="?")
    for names, dest, switch in options:
        p.add_argument(*names, dest=dest, action="store_true" if switch else "store")
    try:
        known, _ = p.parse_known_args(list(argv))
    except (argparse.ArgumentError, SystemExit):  # a flag without its value, at the end
        return None, {}
    values = vars(known)
    return values.pop("positional"), values


def _lenient_outputs(values: dict[str, Any]) -> Outputs:
    return Outputs(json=values.get("json"), junit=values.get("junit"), markdown=values.get("markdown"), quiet=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["inspect"] and not os.path.isfile("inspect"):  # runtime-probe inspect PKG
        from runtime_probe.inspect import main as inspect_main

        return inspect_main(args[1:])
    if argv is None:  # the command itself, not a caller's Python process: SIGTERM/SIGHUP unwind
        install_stop_signals()
    parser = build_parser()
    try:
        values = vars(parser.parse_args(args))
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        package, named = lenient_values(args)
        write_error_reports(error_report("probe", package, exc), _lenient_outputs(named), probe_paths(package, named))
        return 2
    return run_guarded("probe", values["package"], values, lambda: _probe(values))


def run_guarded(kind: str, package: str | None, values: dict[str, Any], body: Callable[[], int]) -> int:
    """Run ``body``; an expected error, a signal or a bug still leaves a report at --json/--junit."""
    outputs = outputs_of(values)
    paths = probe_paths(package, values)
    try:
        return body()
    except GuardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        write_error_reports(error_report(kind, package, exc), outputs, paths)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        write_error_reports(error_report(kind, package, ToolError("interrupted")), outputs, paths)
        return 3
    except Terminated as exc:  # SIGTERM or SIGHUP outside probe() (which reports it itself)
        print(f"terminated ({exc.name})", file=sys.stderr)
        write_error_reports(error_report(kind, package, exc), outputs, paths)
        return 3
    except Exception as exc:  # noqa: BLE001 - a bug of ours: say so, keep the traceback, exit 3
        machine = environment_error(exc)
        if machine is not None:  # a full disk: the machine's doing, said as such
            print(f"error: {machine}", file=sys.stderr)
            write_error_reports(error_report(kind, package, machine), outputs, paths)
            return machine.exit_code
        print(f"error: {kind} failed unexpectedly (this is a bug in runtime_probe):", file=sys.stderr)
        traceback.print_exc()
        write_error_reports(error_report(kind, package, exc), outputs, paths)
        return 3


def _probe(values: dict[str, Any]) -> int:
    from runtime_probe.probe.run import probe

    package = values["package"]
    outputs = outputs_of(values)
    paths = probe_paths(package, values)
    check_outputs(outputs, paths)
    options = probe_options(values)
    progress = progress_for(outputs)
    try:
        report = probe(package, options, progress)
        log_report_lines(report, progress)
    except KeyboardInterrupt:
        raise interrupted(progress) from None
    finally:
        progress.close()
    emit_report(report, outputs, paths)
    return report.exit_code if not outputs.strict else dataclasses.replace(report, strict=True).exit_code


if __name__ == "__main__":
    sys.exit(main())
