"""Slurm: an ``sbatch --array`` job with one task per node, its submit script, and a prolog.

Slurm has no per-task ``--nodelist``: a 1-node array task goes wherever the scheduler puts it,
and two tasks may land on one node while another is never probed. The submit script therefore
submits the array held (``--hold``), pins task *i* to node *i* (``scontrol update
JobId=JOB_i ReqNodeList=NODE``: a held task is still pending, so its required nodes may be set),
then releases it; if any pin fails, the array is cancelled (still held, nothing ran), never released
unpinned. The nodes come from ``--nodelist`` (Slurm's hostlist syntax, expanded by
``scontrol show hostnames``) or from the nodes whose features include ``--constraint`` (``sinfo``),
at submit time, on the cluster.

Each task runs ``python -m runtime_probe.node_check`` and leaves ``REPORTS/NODE.json`` on the
shared folder: ``aoti-guard fleet report REPORTS`` aggregates them. A task that exits 1 is a node
the package does not fit (a verdict), not a failed tool run: read the reports, not sbatch's code.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runtime_probe.reporting.errors import ToolError, UsageError
from runtime_probe.reporting.escaping import UnsafeValue, for_shell, for_terminal, require_plain

__all__ = [
    "SlurmPlan",
    "Submitted",
    "plain_value",
    "render_batch",
    "render_prolog",
    "render_submit",
    "shell_word",
    "submit",
    "wait",
]

_TIME = re.compile(r"^(\d+-)?\d{1,2}(:\d{2}){0,2}$")  # Slurm's --time forms: MM, HH:MM:SS, D-HH...
_NAME = re.compile(r"^[A-Za-z0-9._,\[\]-]+$")  # hostlists and feature names: no shell syntax
_FEATURE = re.compile(r"^[A-Za-z0-9._-]+$")
_PARTITION = re.compile(r"^[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*$")  # one partition or a comma list
_MEM = re.compile(r"^[0-9]+[KMGT]?$")  # Slurm's --mem: megabytes, or a K/M/G/T suffix


def _refused(exc: UnsafeValue, flag: str) -> UsageError:
    return UsageError(
        f"{exc}: refused, it would reach a generated script or manifest",
        hint=f"give {flag} without newlines, tabs or other control characters",
    )


def plain_value(value: str, flag: str) -> str:
    """``value`` unchanged when it holds no control character (``require_plain``), else a
    UsageError naming ``flag``: what a manifest's command line or comment may carry."""
    try:
        return require_plain(value, flag)
    except UnsafeValue as exc:
        raise _refused(exc, flag) from None


def shell_word(value: str, flag: str) -> str:
    """``value`` as one word of a generated script (``for_shell``); a value no quoting makes safe
    (a control character: a newline would start a command of its own) is the user's mistake,
    a UsageError naming ``flag``."""
    try:
        return for_shell(value, flag)
    except UnsafeValue as exc:
        raise _refused(exc, flag) from None


@dataclass(frozen=True)
class SlurmPlan:
    """What ``fleet slurm`` writes: which package, where reports go, which nodes, what each task asks for."""

    package: str  # absolute path, the same on every node (a shared file system)
    reports: str  # absolute path of the shared report folder
    nodelist: str | None = None  # Slurm hostlist: gpu[01-16],cpu01
    constraint: str | None = None  # one node feature
    python: str = "python3"  # on the nodes, with runtime_probe importable
    probe_args: str = ""
    partition: str | None = None
    time_limit: str = "01:00:00"
    gpus: int = 0  # --gres=gpu:N per task; 0 asks for none (the probe still sees what the node exposes)
    cpus: int = 2
    mem: str = "8G"
    job_name: str = "aoti-guard-fleet"
    deadline_s: int = 3000  # node_check's own limit, inside --time

    def values(self) -> tuple[tuple[str, str], ...]:
        """Every text value the scripts carry, with the flag that gave it."""
        given = (
            ("PKG", self.package),
            ("--reports", self.reports),
            ("--nodelist", self.nodelist),
            ("--constraint", self.constraint),
            ("--python", self.python),
            ("--probe-args", self.probe_args),
            ("--partition", self.partition),
            ("--time", self.time_limit),
            ("--mem", self.mem),
            ("job name", self.job_name),
        )
        return tuple((flag, value) for flag, value in given if value is not None)

    def check(self) -> None:
        """Raise UsageError for a plan Slurm would refuse, or one that could inject shell syntax."""
        for flag, value in self.values():
            shell_word(value, flag)
        if bool(self.nodelist) == bool(self.constraint):
            raise UsageError(
                "say which nodes to probe: --nodelist or --constraint (one of them)",
                hint="--nodelist 'gpu[01-16]' pins one task to each listed node; --constraint h100 takes every node with that feature",
            )
        if self.nodelist and not _NAME.match(self.nodelist):
            raise UsageError(f"--nodelist {self.nodelist!r} is not a Slurm hostlist", hint="e.g. gpu[01-16],cpu01")
        if self.constraint and not _FEATURE.match(self.constraint):
            raise UsageError(
                f"--constraint {self.constraint!r}: one node feature is supported (letters, digits, . _ -)",
                hint="for an expression of features, list the nodes with sinfo and pass --nodelist",
            )
        if not _TIME.match(self.time_limit):
            raise UsageError(f"--time {self.time_limit!r} is not a Slurm time", hint="e.g. 01:00:00 or 1-00:00:00")
        if not _MEM.match(self.mem):
            raise UsageError(f"--mem {self.mem!r} is not a Slurm memory size", hint="megabytes, or a K, M, G or T suffix: 8G, 16000")
        if self.partition is not None and not _PARTITION.match(self.partition):
            raise UsageError(
                f"--partition {self.partition!r} is not a Slurm partition name", hint="letters, digits, . _ -; several: gpu,gpu-long"
            )
        if not _FEATURE.match(self.job_name):
            raise UsageError(f"the job name {self.job_name!r} is not one word (letters, digits, . _ -)")
        try:
            shlex.split(self.probe_args)
        except ValueError as exc:
            raise UsageError(
                f"--probe-args {self.probe_args!r} does not parse as shell words ({exc})", hint="e.g. '--fast --timeout 600'"
            ) from None
        for name, path in (("PKG", self.package), ("--reports", self.reports)):
            if not os.path.isabs(path):
                raise UsageError(f"{name} {path!r} must be an absolute path on the shared file system every node mounts")
        if self.gpus < 0 or self.cpus < 1:
            raise UsageError("--gpus must be 0 or more and --cpus 1 or more")


def _node_check(plan: SlurmPlan, probe_args: str | None = None) -> str:
    """node_check's command line, each word quoted. ``--probe-args=FLAGS`` is one word: as two,
    argparse takes a value that starts with ``-`` (``--fast``) for an option and refuses it (exit 2,
    no verdict), and a node may run a node_check older than the one that reads that form too."""
    flags = plan.probe_args if probe_args is None else probe_args
    words = [
        shell_word(plan.python, "--python"),
        "-m",
        "runtime_probe.node_check",
        shell_word(plan.package, "PKG"),
        "--report-dir",
        shell_word(plan.reports, "--reports"),
        "--deadline",
        str(int(plan.deadline_s)),
    ]
    if flags:
        words.append(shell_word(f"--probe-args={flags}", "--probe-args"))
    return " ".join(words)


def render_batch(plan: SlurmPlan) -> str:
    """The array job's batch script (the array's size is given at submit time, one per node).

    ``#SBATCH`` lines are read by sbatch's own parser (quotes and backslashes, not bash's rules):
    only values held to Slurm's formats by ``check`` go there; the log path, which holds the
    reports folder, is given on the submit script's sbatch command line instead."""
    plan.check()
    lines = [
        "#!/bin/bash",
        f"# aoti-guard fleet slurm: probe {shell_word(plan.package, 'PKG')} on one node per array task.",
        "# Submit with the submit script beside it (it pins task i to node i); exit 0 pass, 1 fail, 2 no verdict.",
        f"#SBATCH --job-name={shell_word(plan.job_name, 'job name')}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --cpus-per-task={int(plan.cpus)}",
        f"#SBATCH --mem={shell_word(plan.mem, '--mem')}",
        f"#SBATCH --time={shell_word(plan.time_limit, '--time')}",
        "#SBATCH --no-requeue",  # a failing node's verdict is final; a dead node is seen as a missing report
    ]
    if plan.partition:
        lines.append(f"#SBATCH --partition={shell_word(plan.partition, '--partition')}")
    if plan.gpus:
        lines.append(f"#SBATCH --gres=gpu:{int(plan.gpus)}")
    if plan.constraint:
        lines.append(f"#SBATCH --constraint={shell_word(plan.constraint, '--constraint')}")
    lines += ["set -u", f"exec {_node_check(plan)}", ""]
    return "\n".join(lines)


def render_submit(plan: SlurmPlan, batch_path: str) -> str:
    """The submit script: find the nodes, submit the array held, pin each task, release. Prints the job id.

    Until every task is pinned and the array released, any exit (a pin that fails: a misspelt or
    unknown node; any other error; SIGINT, SIGTERM, SIGHUP) cancels the held array. Releasing it
    instead would let the unpinned tasks run wherever Slurm puts them, each reporting for a node it
    was not meant to probe. Should scancel fail too, the array stays held (none of it runs) and the
    script says so, with the command to cancel it."""
    plan.check()
    # sbatch expands %A and %a in --output: a % of the folder's own name is written %%
    output = shell_word(f"--output={plan.reports.replace('%', '%%')}/logs/%A_%a.out", "--reports")
    if plan.nodelist:
        find = f"mapfile -t NODES < <(scontrol show hostnames {shell_word(plan.nodelist, '--nodelist')})"
    else:
        part = f" -p {shell_word(plan.partition, '--partition')}" if plan.partition else ""
        feature = shell_word(plan.constraint or "", "--constraint")
        find = f"mapfile -t NODES < <(sinfo -h -N{part} -o '%N %f' | awk -v f={feature} '{{n=split($2,a,\",\"); for(i=1;i<=n;i++) if(a[i]==f) print $1}}' | sort -u)"
    return "\n".join(
        [
            "#!/bin/bash",
            "# aoti-guard fleet slurm: one array task per node, each pinned to its node (Slurm has no per-task --nodelist).",
            "set -euo pipefail",
            "JOB=",
            "# Any exit before the release cancels the held array: released unpinned, a task runs on any node.",
            "cancel_held() {",
            '  [ -n "$JOB" ] || return 0',
            '  if scancel "$JOB" >/dev/null 2>&1; then echo "array $JOB cancelled while held: none of its tasks ran" >&2',
            '  else echo "array $JOB could not be cancelled and stays held, so none of its tasks runs: cancel it with scancel $JOB" >&2; fi',
            "}",
            "trap cancel_held EXIT",
            "trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP  # so that the EXIT trap runs",
            find,
            "N=${#NODES[@]}",
            '[ "$N" -gt 0 ] || { echo "no node matched: nothing submitted" >&2; exit 2; }',
            f"mkdir -p {shell_word(plan.reports, '--reports')}/logs",
            f"JOB=$(sbatch --parsable --hold --array=0-$((N - 1)) {output} {shell_word(batch_path, '-o/--out-dir')})",
            "JOB=${JOB%%;*}",
            'for i in "${!NODES[@]}"; do',
            '  scontrol update JobId="${JOB}_${i}" ReqNodeList="${NODES[$i]}" \\',
            '    || { echo "pinning task $i of array $JOB to node ${NODES[$i]} failed (scontrol update exit $?)" >&2; exit 3; }',
            "done",
            'scontrol release "$JOB"',
            "trap - EXIT",
            "printf '%s\\n' \"$JOB\"",
            'echo "submitted array $JOB: $N task(s), one per node: ${NODES[*]}" >&2',
            "",
        ]
    )


def render_prolog(plan: SlurmPlan, max_age_s: int = 86400) -> str:
    """A Slurm Prolog (slurm.conf ``Prolog=``): before a job starts on a node, make sure the package
    passed there. A fresh passing report (newer than the package, younger than ``max_age_s``) is
    reused; else the node is probed with ``--fast``. Exit 1 (the package does not fit) makes Slurm
    drain the node and requeue the job; no verdict exits 0 (the tool's trouble must not take a
    node out of service) and is logged with ``logger``. It runs as root on every node: every value
    in it is one quoted word (``shell_word``)."""
    plan.check()
    check = (
        "import json,sys\n"
        "try: d=json.load(open(sys.argv[1]))\n"
        "except Exception: sys.exit(1)\n"
        "sys.exit(0 if isinstance(d,dict) and d.get('exit_code')==0 and d.get('kind')=='probe' else 1)"
    )
    fast = plan.probe_args or "--fast"
    return "\n".join(
        [
            "#!/bin/bash",
            f"# aoti-guard fleet slurm prolog: {shell_word(plan.package, 'PKG')} must pass on this node before a job starts here.",
            "# Install: Prolog=/etc/slurm/prolog.d/aoti-guard.sh in slurm.conf (runs as root on the node).",
            "set -u",
            f"PKG={shell_word(plan.package, 'PKG')}",
            f'REPORT={shell_word(plan.reports, "--reports")}/"$(hostname -s)".json',
            f"MAX_AGE_S={int(max_age_s)}",
            'if [ -f "$REPORT" ] && [ "$REPORT" -nt "$PKG" ] && [ $(( $(date +%s) - $(stat -c %Y "$REPORT") )) -lt "$MAX_AGE_S" ] \\',
            f'   && {shell_word(plan.python, "--python")} -c {shlex.quote(check)} "$REPORT"; then exit 0; fi',
            f'{_node_check(plan, probe_args=fast)} --node "$(hostname -s)" >/dev/null',
            "rc=$?",
            '[ "$rc" -eq 1 ] && { logger -t aoti-guard "the package $PKG fails on this node: draining (report $REPORT)"; exit 1; }',
            '[ "$rc" -ne 0 ] && logger -t aoti-guard "no verdict on $PKG here (exit $rc): node kept in service"',
            "exit 0",
            "",
        ]
    )


Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


def run_command(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """The one place a Slurm command runs: a missing command or a timeout is a ToolError."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise ToolError(f"{argv[0]} not found on PATH", hint="run on a Slurm login node (sbatch, scontrol, squeue, sinfo)") from None
    except subprocess.TimeoutExpired:
        raise ToolError(f"{shlex.join(argv)} did not answer within {timeout_s:g} s", hint="is slurmctld up? (sinfo)") from None


@dataclass(frozen=True)
class Submitted:
    job_id: str
    message: str


def submit(submit_script: str, runner: Runner = run_command) -> Submitted:
    """Run the submit script; the array's job id, or ToolError with Slurm's own words."""
    proc = runner(["bash", submit_script], 120.0)
    job = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not job.isdigit():
        said = proc.stderr.strip()[-2000:] or proc.stdout.strip()[-2000:]  # Slurm's words and the script's: which array, what became of it
        raise ToolError(
            f"submitting the array failed (exit {proc.returncode}): " + "\n  ".join(for_terminal(line) for line in said.splitlines()),
            hint=f"run it by hand to see more: bash {shell_word(submit_script, 'the submit script')}",
        )
    return Submitted(job, proc.stderr.strip())


def wait(job_id: str, timeout_s: float, runner: Runner = run_command, poll_s: float = 2.0) -> bool:
    """Wait until no task of the array is pending or running; False at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        proc = runner(["squeue", "-h", "-r", "-j", job_id, "-o", "%i %T"], 30.0)
        # once every task ended squeue says "Invalid job id" (exit 1) or prints nothing
        if proc.returncode != 0 or not proc.stdout.strip():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
