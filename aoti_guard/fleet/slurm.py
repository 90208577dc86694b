"""Slurm: an ``sbatch --array`` job with one task per node, its submit script, and a prolog.

Slurm has no per-task ``--nodelist``: a 1-node array task goes wherever the scheduler puts it,
and two tasks may land on one node while another is never probed. The submit script therefore
submits the array held (``--hold``), pins task *i* to node *i* (``scontrol update
JobId=JOB_i ReqNodeList=NODE``: a held task is still pending, so its required nodes may be set),
then releases it. The nodes come from ``--nodelist`` (Slurm's hostlist syntax, expanded by
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

from runtime_probe.errors import ToolError, UsageError

__all__ = ["SlurmPlan", "Submitted", "render_batch", "render_prolog", "render_submit", "submit", "wait"]

_TIME = re.compile(r"^(\d+-)?\d{1,2}(:\d{2}){0,2}$")  # Slurm's --time forms: MM, HH:MM:SS, D-HH...
_NAME = re.compile(r"^[A-Za-z0-9._,\[\]-]+$")  # hostlists and feature names: no shell syntax
_FEATURE = re.compile(r"^[A-Za-z0-9._-]+$")


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

    def check(self) -> None:
        """Raise UsageError for a plan Slurm would refuse, or one that could inject shell syntax."""
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
        for name, path in (("PKG", self.package), ("--reports", self.reports)):
            if not os.path.isabs(path):
                raise UsageError(f"{name} {path!r} must be an absolute path on the shared file system every node mounts")
        if self.gpus < 0 or self.cpus < 1:
            raise UsageError("--gpus must be 0 or more and --cpus 1 or more")


def _node_check(plan: SlurmPlan, probe_args: str | None = None) -> str:
    args = [plan.python, "-m", "runtime_probe.node_check", plan.package, "--report-dir", plan.reports, "--deadline", str(plan.deadline_s)]
    flags = plan.probe_args if probe_args is None else probe_args
    if flags:
        args += ["--probe-args", flags]
    return shlex.join(args)


def render_batch(plan: SlurmPlan) -> str:
    """The array job's batch script (the array's size is given at submit time, one per node)."""
    lines = [
        "#!/bin/bash",
        f"# aoti-guard fleet slurm: probe {plan.package} on one node per array task.",
        "# Submit with the submit script beside it (it pins task i to node i); exit 0 pass, 1 fail, 2 no verdict.",
        f"#SBATCH --job-name={plan.job_name}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --cpus-per-task={plan.cpus}",
        f"#SBATCH --mem={plan.mem}",
        f"#SBATCH --time={plan.time_limit}",
        f"#SBATCH --output={plan.reports}/logs/%A_%a.out",
        "#SBATCH --no-requeue",  # a failing node's verdict is final; a dead node is seen as a missing report
    ]
    if plan.partition:
        lines.append(f"#SBATCH --partition={plan.partition}")
    if plan.gpus:
        lines.append(f"#SBATCH --gres=gpu:{plan.gpus}")
    if plan.constraint:
        lines.append(f"#SBATCH --constraint={plan.constraint}")
    lines += ["set -u", f"exec {_node_check(plan)}", ""]
    return "\n".join(lines)


def render_submit(plan: SlurmPlan, batch_path: str) -> str:
    """The submit script: find the nodes, submit the array held, pin each task, release. Prints the job id."""
    if plan.nodelist:
        find = f"mapfile -t NODES < <(scontrol show hostnames {shlex.quote(plan.nodelist)})"
    else:
        part = f" -p {shlex.quote(plan.partition)}" if plan.partition else ""
        feature = shlex.quote(plan.constraint or "")
        find = f"mapfile -t NODES < <(sinfo -h -N{part} -o '%N %f' | awk -v f={feature} '{{n=split($2,a,\",\"); for(i=1;i<=n;i++) if(a[i]==f) print $1}}' | sort -u)"
    return "\n".join(
        [
            "#!/bin/bash",
            "# aoti-guard fleet slurm: one array task per node, each pinned to its node (Slurm has no per-task --nodelist).",
            "set -euo pipefail",
            find,
            "N=${#NODES[@]}",
            '[ "$N" -gt 0 ] || { echo "no node matched: nothing submitted" >&2; exit 2; }',
            f"mkdir -p {shlex.quote(plan.reports)}/logs",
            f"JOB=$(sbatch --parsable --hold --array=0-$((N - 1)) {shlex.quote(batch_path)})",
            "JOB=${JOB%%;*}",
            "trap 'scontrol release \"$JOB\" >/dev/null 2>&1 || true' EXIT  # never leave the array held",
            'for i in "${!NODES[@]}"; do scontrol update JobId="${JOB}_${i}" ReqNodeList="${NODES[$i]}"; done',
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
    node out of service) and is logged with ``logger``."""
    report = f"{plan.reports}/$(hostname -s).json"
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
            f"# aoti-guard fleet slurm prolog: {plan.package} must pass on this node before a job starts here.",
            "# Install: Prolog=/etc/slurm/prolog.d/aoti-guard.sh in slurm.conf (runs as root on the node).",
            "set -u",
            f"PKG={shlex.quote(plan.package)}",
            f'REPORT="{report}"',
            f"MAX_AGE_S={int(max_age_s)}",
            'if [ -f "$REPORT" ] && [ "$REPORT" -nt "$PKG" ] && [ $(( $(date +%s) - $(stat -c %Y "$REPORT") )) -lt "$MAX_AGE_S" ] \\',
            f'   && {shlex.quote(plan.python)} -c {shlex.quote(check)} "$REPORT"; then exit 0; fi',
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
        raise ToolError(
            f"submitting the array failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:] or proc.stdout.strip()[-2000:]}",
            hint=f"run it by hand to see more: bash {submit_script}",
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
