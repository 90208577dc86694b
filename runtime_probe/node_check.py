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
from runtime_probe.reporting.output import write_atomic
from runtime_probe.reporting.paths import plain_name

__all__ = ["NO_VERDICT_KIND", "main", "node_name", "report_file_name", "run"]

NO_VERDICT_KIND = "fleet.no_verdict"  # aoti_guard/fleet/classes.py reads it
NPD_LINE = 80  # node-problem-detector's default max_output_length
_REPORT_LIMIT = 64 * 1024 * 1024  # a probe report larger than this is not one
_TAIL = 4000  # the probe's stderr kept in a no-verdict record


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
# node_check's options that take a value: given as two words, argparse refuses a value that
# starts with "-" (``--probe-args --fast``: "expected one argument", exit 2, no verdict ever)
_VALUE_OPTIONS = ("--probe-args", "--node", "--report-dir", "--deadline")


class _Stop:
    """SIGTERM, SIGHUP or SIGINT (Slurm's scancel or time limit, a pod's deletion, Ctrl-C): the
    handler records the signal and kills the probe's session if one runs; ``run`` then gives no
    verdict (exit 2, retried). It raises nothing: an exception raised wherever the signal lands
    (inside ``Popen``, after the fork and before the child is ours to kill; while the report is
    written) ended in a traceback and exit 1, the code that means "the package does not fit this
    node" and drains it."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        self._kill()

    @property
    def why(self) -> str:
        name = signal.Signals(self.signum).name if self.signum is not None else "a signal"
        return f"node_check was stopped by {name} (job cancelled, time limit or pod deleted): the probe was killed"

    def started(self, proc: subprocess.Popen[bytes] | None) -> None:
        """``proc`` is the probe (None: it ended); a signal that came while it started kills it now."""
        self._proc = proc
        if self.signum is not None:
            self._kill()

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the probe and its children
            except (ProcessLookupError, PermissionError):
                pass

    def install(self) -> None:
        for signum in _STOP_SIGNALS:
            signal.signal(signum, self)


def node_name(given: str | None = None) -> str:
    for value in (given, os.environ.get("NODE_NAME"), os.environ.get("SLURMD_NODENAME")):
        if value:
            return value
    return platform.node() or "unknown"


def report_file_name(node: str) -> str:
    """The node's report file: its name made plain by the one file-name rule
    (``paths.plain_name``), so that a hostile node name cannot write outside the folder."""
    return f"{plain_name(node, 'node', limit=120)}.json"


def _probe(package: str, probe_args: Sequence[str], work: str, timeout_s: float, stop: _Stop) -> tuple[int | None, str, str]:
    """Run the probe in a child session: (exit code or None, its JSON report path, why none)."""
    report = os.path.join(work, "report.json")
    log = os.path.join(work, "probe.log")
    if stop.signum is not None:  # stopped before the probe started: do not start it
        return None, report, stop.why
    argv = python_argv("runtime_probe", package, "--json", report, "-q", *probe_args)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=child_environment(), start_new_session=True
        )
        stop.started(proc)
        why = ""
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code, why = None, f"the probe did not finish within {timeout_s:g} s (--deadline): killed"
        finally:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            stop.started(None)
    if stop.signum is not None and (code is None or code < 0):  # killed by the stop, not a verdict of its own
        code, why = None, stop.why
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


def run(package: str, *, node: str, probe_args: Sequence[str], timeout_s: float, stop: _Stop | None = None) -> tuple[int, dict[str, Any]]:
    """Probe ``package`` here: (exit code 0/1/2, the JSON document to print). ``stop``: the
    handler main() installs for SIGTERM/SIGHUP/SIGINT (a stopped probe gives no verdict)."""
    ids = {"node": node, "slurm_job": os.environ.get("SLURM_JOB_ID"), "slurm_array_task": os.environ.get("SLURM_ARRAY_TASK_ID")}
    fleet: dict[str, Any] = {k: v for k, v in ids.items() if v}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aoti-node-check-") as work:
        code, report_path, why = _probe(package, probe_args, work, timeout_s, stop or _Stop())
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
        "  python -m runtime_probe.node_check /models/model.pt2 --probe-args=--fast\n"
        "  python -m runtime_probe.node_check /models/model.pt2 --report-dir /shared/aoti-reports   # Slurm\n"
        "  python -m runtime_probe.node_check /models/model.pt2 --npd   # node-problem-detector plugin",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("package", metavar="PKG", help="the .pt2 package")
    p.add_argument("--node", help="this node's name (default: $NODE_NAME, $SLURMD_NODENAME, the host name)")
    p.add_argument("--report-dir", metavar="DIR", help="also write the report to DIR/NODE.json")
    p.add_argument(
        "--probe-args",
        default="",
        metavar="ARGS",
        help="the probe's flags, one shell-quoted string (e.g. --probe-args=--fast, --probe-args '--fast --timeout 600')",
    )
    p.add_argument("--deadline", type=float, default=3600.0, metavar="S", help="seconds the whole probe may take (default 3600)")
    p.add_argument(
        "--exit-zero", action="store_true", help="exit 0 whatever the verdict (a DaemonSet's init container: its pod would restart forever)"
    )
    p.add_argument("--npd", action="store_true", help="node-problem-detector plugin: one line, exit 0 OK / 1 NonOK / 2 Unknown")
    return p


def _joined(argv: Sequence[str]) -> list[str]:
    """``--probe-args --fast`` as ``--probe-args=--fast`` (each option in ``_VALUE_OPTIONS``), so a
    value that starts with ``-`` reaches the option instead of argparse's refusal."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            out += argv[i:]
            break
        if word in _VALUE_OPTIONS and i + 1 < len(argv):
            out.append(f"{word}={argv[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def _say(text: str) -> None:
    """A line on stderr, if there is one to write to (a closed stderr must not turn into exit 1)."""
    if sys.stderr is None:  # print(file=None) would write to stdout, the verdict's stream
        return
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


def _std_fds_open() -> bool:
    """Put /dev/null on any of fds 0-2 that is closed, so that no file opened later lands there (a
    report on fd 1, the verdict written into it); True when stdout (fd 1) was open."""
    stdout_open = True
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            stdout_open = stdout_open and fd != 1
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    return stdout_open


def _print_verdict(text: str) -> bool:
    """Write the verdict on stdout; False when it cannot be (closed, a broken pipe, a full disk)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        try:  # what is left in the buffer goes nowhere, not into a traceback at exit
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
        except OSError:
            pass
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    stop = _Stop()
    stop.install()  # first: a SIGTERM from here on is "no verdict" (exit 2), never a traceback
    stdout_open = _std_fds_open()
    args = _parser().parse_args(_joined(sys.argv[1:] if argv is None else argv))
    try:
        probe_args = shlex.split(args.probe_args)
    except ValueError as exc:
        _say(f"node_check: --probe-args {args.probe_args!r} does not parse ({exc})")
        return 2
    if args.npd and not args.probe_args:
        probe_args = ["--fast"]  # NPD runs the plugin every interval: the pre-flight, not the full probe

    node = node_name(args.node)
    code, doc = run(args.package, node=node, probe_args=probe_args, timeout_s=args.deadline, stop=stop)
    text = json.dumps(doc, indent=2) + "\n"
    if args.report_dir:
        try:
            os.makedirs(args.report_dir, exist_ok=True)
            write_atomic(os.path.join(args.report_dir, report_file_name(node)), text.encode())
        except OSError as exc:
            _say(f"node_check: cannot write the report to {args.report_dir} ({exc.strerror})")
            code = 2
    verdict = _npd_line(code, args.package, doc) + "\n" if args.npd else text
    if not (stdout_open and _print_verdict(verdict)):
        # the verdict is what stdout is for (kubectl logs, NPD): without it this run told nobody
        _say("node_check: the verdict could not be written to stdout (closed or a broken pipe): no verdict (exit 2)")
        code = 2
    return 0 if args.exit_zero else code


if __name__ == "__main__":
    sys.exit(main())
