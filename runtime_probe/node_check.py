"""``python -m runtime_probe.node_check PKG``: one node's verdict on a package, for a fleet.

NVIDIA's health-check convention for node-local, stateless checks: print the verdict on stdout
(the probe's JSON report, and nothing else: ``kubectl logs`` mixes stdout and stderr, so the
probe's progress and text report go to a file) and exit 0 (the package runs here), 1 (it does
not: keep this node out of the rollout) or 2 (no verdict: the probe itself could not run, was
killed or timed out; retry).

- ``--report-dir DIR`` also writes the report to ``DIR/NODE.json`` (atomically), the shared folder
  ``aoti-guard fleet report`` reads (Slurm array tasks, a prolog).
- ``--exit-zero``: exit 0 whatever the verdict (a DaemonSet's init container; the verdict is
  in the JSON).
- ``--npd``: a node-problem-detector custom plugin. One line on stdout, at most 80 characters
  (NPD's default ``max_output_length``), exit 0 OK, 1 NonOK, 2 Unknown.
- The node's name: ``--node``, else ``$NODE_NAME`` (Kubernetes' downward API, set by the manifests
  ``aoti-guard fleet k8s`` renders), ``$SLURMD_NODENAME`` (Slurm), the host name. It is recorded
  in the report's ``extra.fleet``, because a pod's host name is the pod's, not the node's.

When the probe leaves no report (killed, out of memory, a timeout), a ``fleet.no_verdict`` record
stands in for it, so the node still shows up, by name, as a node without a verdict.
Standard library only, like the rest of runtime_probe.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from runtime_probe.child.isolation import child_environment, python_argv
from runtime_probe.output import write_atomic

__all__ = ["NO_VERDICT_KIND", "main", "node_name", "run"]

NO_VERDICT_KIND = "fleet.no_verdict"  # aoti_guard/fleet/classes.py reads it
NPD_LINE = 80  # node-problem-detector's default max_output_length
_REPORT_LIMIT = 64 * 1024 * 1024  # a probe report larger than this is not one
_TAIL = 4000  # the probe's stderr kept in a no-verdict record


class _Stopped(Exception):
    """SIGTERM (Slurm's scancel or time limit, a pod's deletion): kill the probe, say no verdict."""


def node_name(given: str | None = None) -> str:
    for value in (given, os.environ.get("NODE_NAME"), os.environ.get("SLURMD_NODENAME")):
        if value:
            return value
    return platform.node() or "unknown"


def _file_name(node: str) -> str:
    """The node's report file: its name with anything but [A-Za-z0-9._-] replaced (a hostile
    node name must not write outside the folder)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", node)[:120].lstrip(".") or "node"
    return f"{safe}.json"


def _probe(package: str, probe_args: Sequence[str], work: str, timeout_s: float) -> tuple[int | None, str, str]:
    """Run the probe in a child session: (exit code or None, its JSON report path, why none)."""
    report = os.path.join(work, "report.json")
    log = os.path.join(work, "probe.log")
    argv = python_argv("runtime_probe", package, "--json", report, "-q", *probe_args)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=child_environment(), start_new_session=True
        )
        why = ""
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code, why = None, f"the probe did not finish within {timeout_s:g} s (--deadline): killed"
        except _Stopped:
            code, why = None, "node_check was stopped by SIGTERM (job cancelled, time limit or pod deleted): the probe was killed"
        finally:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
    return code, report, why


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - _TAIL))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _read_report(path: str) -> dict[str, Any] | None:
    try:
        if os.path.getsize(path) > _REPORT_LIMIT:
            return None
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def run(package: str, *, node: str, probe_args: Sequence[str], timeout_s: float) -> tuple[int, dict[str, Any]]:
    """Probe ``package`` here: (exit code 0/1/2, the JSON document to print)."""
    ids = {"node": node, "slurm_job": os.environ.get("SLURM_JOB_ID"), "slurm_array_task": os.environ.get("SLURM_ARRAY_TASK_ID")}
    fleet: dict[str, Any] = {k: v for k, v in ids.items() if v}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aoti-node-check-") as work:
        code, report_path, why = _probe(package, probe_args, work, timeout_s)
        data = _read_report(report_path)
        tail = _tail(os.path.join(work, "probe.log"))
    fleet["seconds"] = round(time.monotonic() - started, 3)
    if data is None or code is None:
        reason = why or f"the probe exited {code} without a readable report"
        return 2, {"kind": NO_VERDICT_KIND, "node": node, "reason": reason, "probe_exit": code, "log_tail": tail, "extra": {"fleet": fleet}}
    extra = data.get("extra")
    data["extra"] = {**(extra if isinstance(extra, dict) else {}), "fleet": fleet}
    return (code if code in (0, 1) else 2), data


def _npd_line(code: int, package: str, doc: dict[str, Any]) -> str:
    name = os.path.basename(package)
    if code == 0:
        line = f"aoti-guard: {name} passes on this node"
    elif code == 1:
        errors = [
            str(f.get("code"))
            for p in doc.get("phases") or []
            if isinstance(p, dict)
            for f in p.get("findings") or []
            if isinstance(f, dict) and f.get("severity") == "error"
        ]
        more = f" +{len(errors) - 1} more" if len(errors) > 1 else ""
        line = f"aoti-guard: {name} FAILS here: {errors[0] if errors else 'see report'}{more}"
    else:
        line = f"aoti-guard: no verdict on {name}: {doc.get('reason') or 'the probe could not run'}"
    line = " ".join(line.split())  # one line, whatever a finding code holds
    return line if len(line) <= NPD_LINE else line[: NPD_LINE - 3] + "..."


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m runtime_probe.node_check",
        description="Probe a package on this node and print one JSON verdict on stdout (exit 0 pass, 1 fail, 2 no verdict).",
        epilog="examples:\n"
        "  python -m runtime_probe.node_check /models/model.pt2 --probe-args '--fast'\n"
        "  python -m runtime_probe.node_check /models/model.pt2 --report-dir /shared/aoti-reports   # Slurm\n"
        "  python -m runtime_probe.node_check /models/model.pt2 --npd   # node-problem-detector plugin",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("package", metavar="PKG", help="the .pt2 package")
    p.add_argument("--node", help="this node's name (default: $NODE_NAME, $SLURMD_NODENAME, the host name)")
    p.add_argument("--report-dir", metavar="DIR", help="also write the report to DIR/NODE.json")
    p.add_argument(
        "--probe-args", default="", metavar="ARGS", help="the probe's flags, one shell-quoted string (e.g. '--fast --timeout 600')"
    )
    p.add_argument("--deadline", type=float, default=3600.0, metavar="S", help="seconds the whole probe may take (default 3600)")
    p.add_argument(
        "--exit-zero", action="store_true", help="exit 0 whatever the verdict (a DaemonSet's init container: its pod would restart forever)"
    )
    p.add_argument("--npd", action="store_true", help="node-problem-detector plugin: one line, exit 0 OK / 1 NonOK / 2 Unknown")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        probe_args = shlex.split(args.probe_args)
    except ValueError as exc:
        print(f"node_check: --probe-args {args.probe_args!r} does not parse ({exc})", file=sys.stderr)
        return 2
    if args.npd and not args.probe_args:
        probe_args = ["--fast"]  # NPD runs the plugin every interval: the pre-flight, not the full probe

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stopped

    signal.signal(signal.SIGTERM, stop)
    node = node_name(args.node)
    code, doc = run(args.package, node=node, probe_args=probe_args, timeout_s=args.deadline)
    text = json.dumps(doc, indent=2) + "\n"
    if args.report_dir:
        try:
            os.makedirs(args.report_dir, exist_ok=True)
            write_atomic(os.path.join(args.report_dir, _file_name(node)), text.encode())
        except OSError as exc:
            print(f"node_check: cannot write the report to {args.report_dir} ({exc.strerror})", file=sys.stderr)
            code = 2
    if args.npd:
        print(_npd_line(code, args.package, doc))
    else:
        sys.stdout.write(text)
    return 0 if args.exit_zero else code


if __name__ == "__main__":
    sys.exit(main())
