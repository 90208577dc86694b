"""``python -m runtime_probe.preflight [-- SERVER COMMAND...]``: a serving container's pre-flight.

The entrypoint of the pre-flight image (containers/preflight/Dockerfile), also usable as a
Kubernetes init container. Standard library only, like the rest of runtime_probe.

- It probes ``$AOTI_PACKAGE`` (``--fast`` unless ``$AOTI_PREFLIGHT_ARGS`` says otherwise), writes
  the JSON report to ``$AOTI_PREFLIGHT_REPORT`` (default /tmp/aoti-preflight/report.json) and
  prints the text report.
- A failing package: exit with the probe's code (1 a check failed, 2 usage, 3 the probe could
  not run); the server command is NOT run.
- A passing one: write ``<report>.ok`` (the package's path, size and mtime) and replace this
  process with the server command (``exec``: the server keeps PID 1 and gets the signals). With
  no command, exit 0 (init container).
- ``--check`` (HEALTHCHECK, readinessProbe): exit 0 when ``<report>.ok`` exists and the package
  still has the size and mtime it had when it passed; else 1 with one line saying why. It never
  loads the model or hashes the package: a stat and a small JSON read, cheap every few seconds.

Before anything is removed or written, the run is checked (exit 2, nothing touched): the report,
its ``.ok`` marker and the probe's own outputs must not be the package, the public key or any
other file the probe reads (runtime_probe/reporting/paths.py), and ``$AOTI_PREFLIGHT_ARGS`` must make the
probe probe: ``--help``, ``--version`` (or an abbreviation argparse takes for them),
``--verify-only`` or a ``--json`` of its own would let the pre-flight pass without the package
ever being loaded on this host, or vouch with a report it did not write.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import stat
import sys
from collections.abc import Sequence
from typing import Any

from runtime_probe.reporting.errors import GuardError, UsageError
from runtime_probe.reporting.output import write_atomic
from runtime_probe.reporting.paths import Paths, Write, probe_paths

__all__ = ["DEFAULT_REPORT", "check", "main", "run"]

DEFAULT_REPORT = "/tmp/aoti-preflight/report.json"
DEFAULT_ARGS = "--fast"
EXIT_COMMAND_NOT_FOUND = 127  # what shells return for a command they cannot run


def _marker(report: str) -> str:
    return report + ".ok"


def _stamp(package: str) -> dict[str, Any]:
    st = os.stat(package)
    return {"package": os.path.abspath(package), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _probe_values(package: str, probe_args: Sequence[str]) -> dict[str, Any]:
    """The probe's flag values for ``probe_args``, parsed by the probe's own parser (so an
    abbreviation means what it will mean to the probe). Raises UsageError for arguments that
    would not probe this package, or that are not the probe's."""
    from runtime_probe import cli

    source = "AOTI_PREFLIGHT_ARGS / --probe-args"
    shown = shlex.join(probe_args)
    try:
        # --help and --version print and exit (SystemExit, 0): nothing was probed
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            values = vars(cli.build_parser().parse_args([package, *probe_args]))
    except SystemExit:
        raise UsageError(
            f"{source} {shown!r} asks the probe for its help or version: it would exit without probing {package}, "
            "and a pre-flight that did not probe must not pass",
            hint="give probe flags only, e.g. --fast or '--fast --strict' (python -m runtime_probe --help lists them)",
        ) from None
    except UsageError as exc:
        raise UsageError(f"{source} {shown!r}: {exc.message}", hint="python -m runtime_probe --help lists the probe's flags") from None
    if values.get("verify_only"):
        raise UsageError(
            f"{source} {shown!r} has --verify-only: the archive alone, the model never loaded on this host, "
            "so the pre-flight would pass without knowing whether the server can load it",
            hint="drop --verify-only (--fast is the quick pre-flight); run --verify-only as a step of its own",
        )
    if values.get("json"):
        raise UsageError(
            f"{source} {shown!r} has --json {values['json']}: the pre-flight writes its report to --report, "
            "and its .ok marker must vouch for that report",
            hint="set AOTI_PREFLIGHT_REPORT (or --report) instead",
        )
    return values


_REPORT_FLAG = "--report (AOTI_PREFLIGHT_REPORT)"
_MARKER_FLAG = "the pre-flight's marker (the report's path + .ok)"


def _check_paths(package: str, report: str, values: dict[str, Any]) -> None:
    """The path rule (runtime_probe/reporting/paths.py) over the probe's reads and writes, the pre-flight's
    report and marker first. Raises UsageError."""
    probe = probe_paths(package, values)
    own = (Write(_REPORT_FLAG, report), Write(_MARKER_FLAG, _marker(report)))
    for w, message, hint in Paths(probe.reads, (*own, *probe.writes)).problems():
        raise UsageError(message, hint=f"give {_REPORT_FLAG} another path" if w.flag == _MARKER_FLAG else hint)


def _remove_stale(path: str) -> None:
    """Remove an earlier run's file: a regular file or a link to one (or to nothing); never a
    FIFO, a device or ``/dev/stdout``'s link (a report written in place: there is nothing stale)."""
    if not os.path.lexists(path):
        return
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:  # a dangling link
        regular = True
    if regular:
        os.unlink(path)


def run(package: str, report: str, probe_args: Sequence[str], command: Sequence[str]) -> int:
    """Probe, then exec ``command`` if the package passed. Returns an exit code when it does not exec.

    Raises:
        UsageError: before anything is removed or written: ``probe_args`` would not probe, or an
            output would replace a file the probe reads (the package, the public key) or another output.
    """
    from runtime_probe import cli

    if report == "-":
        raise UsageError("--report - (stdout): the pre-flight's report is a file", hint="give AOTI_PREFLIGHT_REPORT a file path")
    values = _probe_values(package, probe_args)
    _check_paths(package, report, values)  # before the stale results go: they may be the package
    try:
        os.makedirs(os.path.dirname(os.path.abspath(report)), exist_ok=True)
        for stale in (report, _marker(report)):  # never let an old result vouch for this start
            _remove_stale(stale)
    except OSError as exc:
        print(f"[preflight] cannot write the report {report}: {exc}", file=sys.stderr, flush=True)
        return 3
    print(f"[preflight] probing {package} ({' '.join(probe_args) or 'full'}); report: {report}", file=sys.stderr, flush=True)
    code = cli.main([package, "--json", report, *probe_args])
    if code != 0:
        print(f"[preflight] FAILED (exit {code}): the server is not started", file=sys.stderr, flush=True)
        return code
    write_atomic(_marker(report), (json.dumps(_stamp(package)) + "\n").encode())
    if not command:
        print("[preflight] passed", file=sys.stderr, flush=True)
        return 0
    print(f"[preflight] passed; exec {shlex.join(command)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], list(command))
    except OSError as exc:
        print(f"[preflight] cannot run the server command {command[0]!r}: {exc.strerror}", file=sys.stderr, flush=True)
        return EXIT_COMMAND_NOT_FOUND
    return 0  # not reached


def check(package: str, report: str) -> tuple[bool, str]:
    """Is there a passing pre-flight for this very package file? (ok, one line saying why)."""
    try:
        with open(_marker(report), encoding="utf-8") as fh:
            stamp = json.load(fh)
    except (OSError, ValueError):
        return False, f"no passing pre-flight result at {_marker(report)}"
    try:
        now = _stamp(package)
    except OSError as exc:
        return False, f"package {package}: {exc.strerror}"
    if not isinstance(stamp, dict) or any(stamp.get(k) != now[k] for k in ("package", "size", "mtime_ns")):
        return False, f"package {package} changed since its pre-flight passed (size or mtime differ): restart to re-check it"
    return True, f"pre-flight passed for {package}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m runtime_probe.preflight",
        description="Probe the package, then exec the server command only if it passed.",
        epilog="exit codes: the probe's (1 a check failed, 2 usage, 3 the probe could not run) when it fails; "
        "the server's once it runs; 127 when the server command cannot be run; --check: 0 healthy, 1 not",
    )
    p.add_argument("--package", default=os.environ.get("AOTI_PACKAGE"), help="the .pt2 (default: $AOTI_PACKAGE)")
    p.add_argument(
        "--report",
        default=os.environ.get("AOTI_PREFLIGHT_REPORT", DEFAULT_REPORT),
        help=f"where the JSON report goes (default: $AOTI_PREFLIGHT_REPORT or {DEFAULT_REPORT})",
    )
    p.add_argument(
        "--probe-args",
        default=os.environ.get("AOTI_PREFLIGHT_ARGS", DEFAULT_ARGS),
        help=f"arguments for the probe, shell-quoted (default: $AOTI_PREFLIGHT_ARGS or {DEFAULT_ARGS!r}; '' = the full probe)",
    )
    p.add_argument("--check", action="store_true", help="health check: is there a passing pre-flight for this package file?")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the server command, after --")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not args.package:
        parser.print_usage(sys.stderr)
        print("error: no package: set AOTI_PACKAGE or pass --package", file=sys.stderr)
        return 2
    if args.check:
        ok, why = check(args.package, args.report)
        print(why, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    try:
        probe_args = shlex.split(args.probe_args)
    except ValueError as exc:
        print(f"error: --probe-args / AOTI_PREFLIGHT_ARGS: {exc}", file=sys.stderr)
        return 2
    try:
        return run(args.package, args.report, probe_args, command)
    except GuardError as exc:
        print(f"[preflight] error: {exc}", file=sys.stderr, flush=True)
        print("[preflight] FAILED: nothing was probed; the server is not started", file=sys.stderr, flush=True)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
