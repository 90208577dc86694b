"""``python -m runtime_probe PKG``: the pre-flight for serving containers (standard library only).

Exit codes: 0 every check passed; 1 the package or host failed a check; 2 usage error; 3 the
probe itself could not run.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from runtime_probe._version import __version__
from runtime_probe.errors import GuardError
from runtime_probe.report import Report, render_text, write_json, write_junit

__all__ = ["emit_report", "main", "progress_printer"]

EPILOG = """\
examples:
  python -m runtime_probe model.pt2                 full probe on the package's own device
  python -m runtime_probe model.pt2 --fast          container pre-flight (archive, host, load, one golden run)
  python -m runtime_probe model.pt2 --device cuda:1 --json report.json
  python -m runtime_probe model.pt2 --weights new.safetensors
  python -m runtime_probe model.pt2 --inputs request.safetensors   replay inputs; a failure climbs the escalation ladder
  python -m runtime_probe model.pt2 --all-devices                  every visible GPU, in parallel
  python -m runtime_probe model.pt2 --public-key release.pub   require the release pipeline's signature

exit codes: 0 passed, 1 a check failed, 2 usage error, 3 the probe could not run
"""


def progress_printer(quiet: bool):  # type: ignore[no-untyped-def]
    def say(phase: str, event: str) -> None:
        if not quiet:
            print(f"[{phase}] {event}", file=sys.stderr, flush=True)

    return say


def emit_report(report: Report, *, json_path: str | None, junit_path: str | None, verbose: bool, quiet: bool) -> None:
    """Write the report files first (a reader must never see them missing), then the text."""
    if json_path:
        write_json(report, json_path)
    if junit_path:
        write_junit(report, junit_path)
    if not quiet or not report.passed:
        sys.stdout.write(render_text(report, verbose=verbose))
        sys.stdout.flush()


def _check_output_path(path: str | None, flag: str) -> None:
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise _Usage(f"{flag}: folder {folder} does not exist")


class _Usage(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m runtime_probe",
        description="Check an AOTInductor package (.pt2) on this host before serving it: archive safety and hashes, "
        "host compatibility (device, GPU arch, driver, torch, CPU ISA, C++ runtime), loading in an isolated child, "
        "constants, and the golden samples the build recorded.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("package", metavar="PKG", help="the .pt2 package")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: the device the package was built for)")
    p.add_argument(
        "--weights",
        metavar="FILE",
        help="a .safetensors file: validated against the contract, then loaded in place of the package's constants",
    )
    p.add_argument(
        "--inputs",
        metavar="FILE",
        help="a .safetensors file of inputs (keys = input names) to run after the golden samples, e.g. captured from a failing request",
    )
    p.add_argument(
        "--inputs-device",
        metavar="D",
        help="place --inputs on this device instead of the model's (cpu replays a caller that forgot .cuda())",
    )
    p.add_argument(
        "--public-key",
        metavar="KEY.pub",
        help="an Ed25519 public key (PEM, from aoti-guard keygen): require a valid signature by it before anything is opened",
    )
    p.add_argument("--fast", action="store_true", help="pre-flight: archive, host, load and one golden sample")
    p.add_argument(
        "--all-devices", action="store_true", help="probe every visible GPU in parallel, one child per device, a report section per device"
    )
    p.add_argument(
        "--no-escalate",
        action="store_true",
        help="do not rerun a failure with more instruments (strict checks, debug twin, sanitizer, debugger, remedies)",
    )
    p.add_argument("--escalate-timeout", type=float, default=600.0, metavar="S", help="seconds the whole escalation may take (default 600)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S", help="seconds each load or golden run may take (default 300)")
    p.add_argument("--json", metavar="PATH", help="write the JSON report here")
    p.add_argument("--junit", metavar="PATH", help="write a JUnit XML report here (a testcase per phase)")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also show the informational findings of phases that passed (a failed phase shows all of its own)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress; the report only when a check fails")
    p.add_argument("--version", action="version", version=f"runtime_probe {__version__}")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on bad usage, as argparse does
    try:
        _check_output_path(args.json, "--json")
        _check_output_path(args.junit, "--junit")
        if args.timeout <= 0:
            raise _Usage("--timeout must be positive")
        from runtime_probe.probe.run import ProbeOptions, probe

        if args.escalate_timeout <= 0:
            raise _Usage("--escalate-timeout must be positive")
        options = ProbeOptions(
            device=args.device,
            weights=args.weights,
            inputs=args.inputs,
            inputs_device=args.inputs_device,
            fast=args.fast,
            timeout_s=args.timeout,
            escalate=not args.no_escalate,
            escalate_timeout_s=args.escalate_timeout,
            all_devices=args.all_devices,
            public_key=args.public_key,
        )
        report = probe(args.package, options, progress_printer(args.quiet))
        emit_report(report, json_path=args.json, junit_path=args.junit, verbose=args.verbose, quiet=args.quiet)
        return report.exit_code
    except _Usage as exc:
        parser.print_usage(sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except GuardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 3
    except Exception:  # noqa: BLE001 - a bug of ours: say so, keep the traceback, exit 3
        print("error: runtime_probe failed unexpectedly (this is a bug in runtime_probe):", file=sys.stderr)
        traceback.print_exc()
        return 3
