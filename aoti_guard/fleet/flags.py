"""The flags of ``fleet k8s`` and ``fleet slurm``, declared once as data, and the value each command's
flags make (``K8sArgs``, ``SlurmArgs``).

A flag's default is read from the args dataclass, whose fields that reach the rendered plan take
their defaults from the plan (``K8sPlan``, ``SlurmPlan``): one home for each default, so the help
text, the command and a library caller of the plan agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aoti_guard.flags import OptionFlag, option_fields
from aoti_guard.fleet.k8s import K8sPlan, NodeGroup
from aoti_guard.fleet.slurm import SlurmPlan
from runtime_probe.reporting.output import STDOUT

__all__ = ["K8S_FLAGS", "SLURM_FLAGS", "K8sArgs", "SlurmArgs"]


@dataclass(frozen=True)
class K8sArgs:
    """``fleet k8s``'s flags as one value. The plan's own fields default to ``K8sPlan``'s."""

    package: str
    image: str
    nodes_json: str | None = None
    selects: tuple[str, ...] = ()
    count: int | None = None
    daemonset: bool = K8sPlan.daemonset
    pvc: str | None = K8sPlan.pvc
    host_path: str | None = K8sPlan.host_path
    package_image: str | None = K8sPlan.package_image
    gpus: int = K8sPlan.gpus
    namespace: str = K8sPlan.namespace
    probe_args: str = K8sPlan.probe_args
    retries: int = K8sPlan.retries
    deadline_s: int = K8sPlan.deadline_s
    run_id: str | None = None  # None: the time (fleet/cli.py)
    output: str = STDOUT
    apply: bool = False
    reports: str = "aoti-fleet-reports"
    wait_timeout_s: int = 7200

    @classmethod
    def from_values(cls, package: str, values: Mapping[str, Any]) -> K8sArgs:
        return cls(package=package, **option_fields(K8S_FLAGS, values))

    def plan(self, run_id: str, groups: tuple[NodeGroup, ...]) -> K8sPlan:
        """The plan to render: every field the plan shares with these args, and the run's id and node groups."""
        shared = {f.name for f in dataclasses.fields(K8sPlan)} & {f.name for f in dataclasses.fields(self)} - {"run_id"}
        return K8sPlan(run_id=run_id, groups=groups, **{name: getattr(self, name) for name in shared})


@dataclass(frozen=True)
class SlurmArgs:
    """``fleet slurm``'s flags as one value. The plan's own fields default to ``SlurmPlan``'s."""

    package: str
    reports: str
    nodelist: str | None = SlurmPlan.nodelist
    constraint: str | None = SlurmPlan.constraint
    python: str = SlurmPlan.python
    probe_args: str = SlurmPlan.probe_args
    partition: str | None = SlurmPlan.partition
    time_limit: str = SlurmPlan.time_limit
    gpus: int = SlurmPlan.gpus
    cpus: int = SlurmPlan.cpus
    mem: str = SlurmPlan.mem
    out_dir: str = "aoti-fleet-slurm"
    submit: bool = False
    wait: bool = False
    wait_timeout_s: int = 7200

    @classmethod
    def from_values(cls, package: str, values: Mapping[str, Any]) -> SlurmArgs:
        return cls(package=package, **option_fields(SLURM_FLAGS, values))

    def plan(self) -> SlurmPlan:
        """The plan to write: every field the plan shares with these args."""
        shared = {f.name for f in dataclasses.fields(SlurmPlan)} & {f.name for f in dataclasses.fields(self)}
        return SlurmPlan(**{name: getattr(self, name) for name in shared})


class K8sFlag(OptionFlag):
    SOURCE = K8sArgs


class SlurmFlag(OptionFlag):
    SOURCE = SlurmArgs


K8S_FLAGS: tuple[K8sFlag, ...] = (
    K8sFlag(
        "--image",
        "The probe image: python, torch and runtime_probe (e.g. your serving image's pre-flight image)",
        field="image",
        metavar="IMAGE",
        required=True,
    ),
    K8sFlag(
        "--nodes-json",
        "`kubectl get nodes -o json`: one Job per class of GFD labels (product, compute capability, driver)",
        field="nodes_json",
        metavar="FILE",
    ),
    K8sFlag(
        "--select",
        "One class by node labels (repeat), with --count",
        field="selects",
        multiple=True,
        metavar="LABEL=VALUE",
        param="selects",
    ),
    K8sFlag("--count", "How many nodes the --select class has (one pod per node)", kind="int", field="count", minimum=1),
    K8sFlag("--daemonset", "One DaemonSet on every node instead of a Job per class", kind="switch", field="daemonset"),
    K8sFlag("--pvc", "The package from this PersistentVolumeClaim, mounted read-only at PKG's folder", field="pvc", metavar="CLAIM"),
    K8sFlag(
        "--host-path",
        "The package from this folder on every node, mounted read-only at PKG's folder",
        field="host_path",
        metavar="DIR",
    ),
    K8sFlag(
        "--package-image",
        "The package from this image (an init container copies PKG out of it)",
        field="package_image",
        metavar="IMG",
    ),
    K8sFlag(
        "--gpus",
        "GPUs each pod requests; 0 takes none from serving pods (it still sees them)",
        kind="int",
        field="gpus",
        minimum=0,
    ),
    K8sFlag("--namespace", "The namespace of the Jobs (or the DaemonSet)", field="namespace", metavar="NS"),
    K8sFlag("--probe-args", "The probe's flags, e.g. '--fast --timeout 600'", field="probe_args", metavar="ARGS"),
    K8sFlag("--retries", "Reruns per node of a run that gave no verdict (exit 2)", kind="int", field="retries", minimum=0),
    K8sFlag("--deadline", "Seconds one node's probe may take", kind="int", field="deadline_s", metavar="S", minimum=60),
    K8sFlag("--run-id", "Labels this run's objects (default: the time, e.g. 20261125-101500)", field="run_id", metavar="ID"),
    K8sFlag("--output", "Where the manifests go ('-': stdout)", field="output", short="-o", metavar="FILE"),
    K8sFlag(
        "--apply",
        "kubectl apply them, wait, collect each pod's report into --reports, print the fleet verdict",
        kind="switch",
        field="apply",
        param="apply_",
    ),
    K8sFlag("--reports", "With --apply: where the pods' reports go", field="reports", metavar="DIR"),
    K8sFlag("--wait-timeout", "With --apply: how long to wait", kind="int", field="wait_timeout_s", metavar="S", minimum=1),
)

SLURM_FLAGS: tuple[SlurmFlag, ...] = (
    SlurmFlag(
        "--reports",
        "The shared folder every node writes NODE.json into (absolute)",
        field="reports",
        metavar="DIR",
        required=True,
    ),
    SlurmFlag("--nodelist", "The nodes to probe, one task each: gpu[01-16],cpu01", field="nodelist", metavar="HOSTLIST"),
    SlurmFlag("--constraint", "Probe every node with this feature, one task each", field="constraint", metavar="FEATURE"),
    SlurmFlag("--python", "The interpreter on the nodes (runtime_probe and torch importable)", field="python", metavar="PYTHON"),
    SlurmFlag("--probe-args", "The probe's flags, e.g. '--fast'", field="probe_args", metavar="ARGS"),
    SlurmFlag("--partition", "The Slurm partition (several: gpu,gpu-long)", field="partition", metavar="NAME"),
    SlurmFlag("--time", "Each task's --time", field="time_limit", metavar="TIME", param="time_limit"),
    SlurmFlag("--gpus", "--gres=gpu:N per task (0: none)", kind="int", field="gpus", minimum=0),
    SlurmFlag("--cpus", "CPUs per task", kind="int", field="cpus", minimum=1),
    SlurmFlag("--mem", "Memory per task (a Slurm size: 8G, 16000)", field="mem", metavar="SIZE"),
    SlurmFlag("--out-dir", "Where the scripts go", field="out_dir", short="-o", metavar="DIR"),
    SlurmFlag("--submit", "Submit the array (sbatch --hold, pin each task to its node, release)", kind="switch", field="submit"),
    SlurmFlag(
        "--wait",
        "With --submit: wait for every task, then print the fleet verdict from --reports",
        kind="switch",
        field="wait",
        param="wait_",
    ),
    SlurmFlag("--wait-timeout", "With --submit --wait: how long to wait", kind="int", field="wait_timeout_s", metavar="S", minimum=1),
)
