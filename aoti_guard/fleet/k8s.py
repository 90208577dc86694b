"""Kubernetes: the manifests that probe a package on every node class (rendered; applied by kube.py).

One Indexed Job per node class (GPU Feature Discovery's labels select the nodes; one pod per node
by pod anti-affinity on the node's host name), or one DaemonSet for every node. The pod runs
``python -m runtime_probe.node_check``: its stdout is the node's JSON report, its exit code the
verdict (0 pass, 1 fail, 2 no verdict), which ``podFailurePolicy`` maps:

- exit 1 -> ``FailIndex``: the package does not fit this node; a verdict, never retried;
- exit 2 -> ``Count``: the tool could not run; retried up to ``backoffLimitPerIndex``;
- a ``DisruptionTarget`` (drain, preemption) -> ``Ignore``: not counted, the pod is recreated.

No GPU is requested unless asked (``gpus``): the pod sees the node's GPUs through
``NVIDIA_VISIBLE_DEVICES=all`` (honoured by the NVIDIA container runtime's default
``accept-nvidia-visible-devices-envvar-when-unprivileged``), so serving pods keep theirs.
The manifests are JSON documents in one YAML stream (JSON is YAML): no YAML writer needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.fleet.classes import obj
from runtime_probe.errors import UsageError

__all__ = ["GFD_LABELS", "K8sPlan", "NodeGroup", "groups_from_nodes", "render", "to_text"]

# GPU Feature Discovery's labels that make a node class (product, compute capability, driver)
GFD_LABELS = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.compute.major",
    "nvidia.com/gpu.compute.minor",
    "nvidia.com/cuda.driver.major",
)
RUN_LABEL = "aoti-guard.dev/run"
CLASS_LABEL = "aoti-guard.dev/class"
CONTAINER = "probe"
PKG_VOLUME = "aoti-package"
_DNS = re.compile(r"[^a-z0-9-]+")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")


def _slug(text: str, limit: int) -> str:
    """A DNS-1123 label from ``text``: lowercase, [a-z0-9-], cut to ``limit`` with a short hash
    of the whole text so two long names never collide."""
    base = _DNS.sub("-", text.lower()).strip("-") or "x"
    if len(base) <= limit:
        return base
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    return f"{base[: limit - 7].rstrip('-')}-{digest}"


@dataclass(frozen=True)
class NodeGroup:
    """One node class as Kubernetes sees it: the GFD label values its nodes share, and how many."""

    labels: Mapping[str, str]  # empty: the nodes without a GPU (no nvidia.com/gpu.product label)
    count: int
    nodes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        if not self.labels:
            return "cpu"
        product = self.labels.get("nvidia.com/gpu.product", "gpu")
        major, minor = self.labels.get("nvidia.com/gpu.compute.major"), self.labels.get("nvidia.com/gpu.compute.minor")
        sm = f"-sm{major}{minor or ''}" if major else ""
        drv = self.labels.get("nvidia.com/cuda.driver.major")
        return _slug(f"{product}{sm}" + (f"-drv{drv}" if drv else ""), 40)


def groups_from_nodes(nodes_doc: Mapping[str, Any]) -> list[NodeGroup]:
    """Node classes from ``kubectl get nodes -o json``: grouped by their GFD labels; nodes without
    ``nvidia.com/gpu.product`` form the CPU class. Unschedulable (cordoned) nodes are left out."""
    items = nodes_doc.get("items")
    if not isinstance(items, list):
        raise UsageError("the nodes JSON has no 'items' list", hint="write it with: kubectl get nodes -o json > nodes.json")
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for node in items:
        if not isinstance(node, Mapping):
            continue
        meta, spec = obj(node.get("metadata")), obj(node.get("spec"))
        if spec.get("unschedulable"):
            continue
        labels = obj(meta.get("labels"))
        key = tuple((k, str(labels[k])) for k in GFD_LABELS if k in labels) if "nvidia.com/gpu.product" in labels else ()
        groups.setdefault(key, []).append(str(meta.get("name", "?")))
    return [NodeGroup(dict(k), len(v), tuple(sorted(v))) for k, v in sorted(groups.items())]


@dataclass(frozen=True)
class K8sPlan:
    """What ``fleet k8s`` renders (the CLI's flags, one field each)."""

    package: str  # the package's path as the pod sees it
    image: str  # the probe image: python, torch and runtime_probe (the pre-flight image)
    run_id: str
    groups: tuple[NodeGroup, ...] = ()
    namespace: str = "default"
    daemonset: bool = False
    pvc: str | None = None  # the package from a PersistentVolumeClaim...
    host_path: str | None = None  # ...a folder on every node...
    package_image: str | None = None  # ...or an image holding it (copied by an init container)
    gpus: int = 0
    cpu: str = "1"
    memory: str = "8Gi"
    probe_args: str = ""
    retries: int = 2  # no-verdict reruns per node (backoffLimitPerIndex)
    deadline_s: int = 3600
    python: str = "python3"
    extra_labels: Mapping[str, str] = field(default_factory=dict)

    def check(self) -> None:
        if not os.path.isabs(self.package):
            raise UsageError(f"PKG {self.package!r} must be the package's absolute path inside the pod", hint="e.g. /models/model.pt2")
        for flag, image in (("--image", self.image), ("--package-image", self.package_image)):
            if image is not None and not _IMAGE.match(image):
                raise UsageError(f"{flag} {image!r} is not an image reference", hint="e.g. registry.example/my-server:1.2-preflight")
        if sum(x is not None for x in (self.pvc, self.host_path, self.package_image)) > 1:
            raise UsageError("give one package source: --pvc, --host-path or --package-image (or none: the package is in --image)")
        if not self.daemonset and not self.groups:
            raise UsageError(
                "no node class to probe",
                hint="give --nodes-json (kubectl get nodes -o json), or --select LABEL=VALUE --count N, or --daemonset",
            )
        if self.gpus < 0 or self.retries < 0:
            raise UsageError("--gpus and --retries must be 0 or more")


def _labels(plan: K8sPlan, group: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "aoti-guard-fleet", RUN_LABEL: plan.run_id, CLASS_LABEL: group, **plan.extra_labels}


def _command(plan: K8sPlan, *extra: str) -> list[str]:
    args = [plan.python, "-m", "runtime_probe.node_check", plan.package, "--node", "$(NODE_NAME)", "--deadline", str(plan.deadline_s)]
    if plan.probe_args:
        args += ["--probe-args", plan.probe_args]
    return [*args, *extra]


def _volumes(plan: K8sPlan) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, the probe's mounts, init containers that bring the package)."""
    pkg_dir = os.path.dirname(plan.package)
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "16Gi"}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]  # AOTI unpacks and dlopen()s its .so there
    inits: list[dict[str, Any]] = []
    if plan.pvc:
        volumes.append({"name": PKG_VOLUME, "persistentVolumeClaim": {"claimName": plan.pvc, "readOnly": True}})
    elif plan.host_path:
        volumes.append({"name": PKG_VOLUME, "hostPath": {"path": plan.host_path, "type": "Directory"}})
    elif plan.package_image:
        volumes.append({"name": PKG_VOLUME, "emptyDir": {"sizeLimit": "32Gi"}})
        inits.append(
            {
                "name": "package",
                "image": plan.package_image,
                "command": ["cp", plan.package, "/aoti-package/"],
                "volumeMounts": [{"name": PKG_VOLUME, "mountPath": "/aoti-package"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
            }
        )
    if plan.pvc or plan.host_path or plan.package_image:
        mounts.append({"name": PKG_VOLUME, "mountPath": pkg_dir, "readOnly": True})
    return volumes, mounts, inits


def _container(plan: K8sPlan, mounts: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    limits: dict[str, Any] = {"memory": plan.memory}
    env: list[dict[str, Any]] = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    if plan.gpus:
        limits["nvidia.com/gpu"] = plan.gpus
    else:  # see the node's GPUs without taking one from the device plugin's pool
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})
    return {
        "name": CONTAINER,
        "image": plan.image,
        "command": _command(plan, *extra),
        "env": env,
        "resources": {"requests": {"cpu": plan.cpu, "memory": plan.memory}, "limits": limits},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _placement(group: NodeGroup | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    if group is None:
        return spec
    if group.labels:
        spec["nodeSelector"] = dict(group.labels)
    else:
        term = {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"}]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return spec


def _job(plan: K8sPlan, group: NodeGroup) -> dict[str, Any]:
    name = _slug(f"aoti-guard-{plan.run_id}-{group.name}", 52)  # the job-name label + pod suffixes stay under 63
    labels = _labels(plan, group.name)
    volumes, mounts, inits = _volumes(plan)
    pod: dict[str, Any] = {
        "restartPolicy": "Never",  # podFailurePolicy needs it
        **_placement(group),
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_container(plan, mounts)],
        "volumes": volumes,
    }
    if inits:
        pod["initContainers"] = inits
    # one pod per node: no two pods of this Job on one host name
    anti = {"labelSelector": {"matchLabels": {"job-name": name}}, "topologyKey": "kubernetes.io/hostname"}
    pod.setdefault("affinity", {})["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [anti]}
    on_exit = {"containerName": CONTAINER, "operator": "In"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": plan.namespace, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": group.count,
            "parallelism": group.count,
            "backoffLimitPerIndex": plan.retries,
            "maxFailedIndexes": group.count,  # a failing node ends its index, not the other nodes' runs
            "activeDeadlineSeconds": plan.deadline_s + 900,  # the probe's own limit, plus pulling the image
            "ttlSecondsAfterFinished": 86400,
            "podFailurePolicy": {
                "rules": [
                    {"action": "FailIndex", "onExitCodes": {**on_exit, "values": [1]}},  # does not fit: a verdict
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},  # drained, preempted
                    {"action": "Count", "onExitCodes": {**on_exit, "values": [2]}},  # no verdict: retry
                ]
            },
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def _daemonset(plan: K8sPlan) -> dict[str, Any]:
    name = _slug(f"aoti-guard-{plan.run_id}", 52)
    labels = _labels(plan, "all")
    volumes, mounts, inits = _volumes(plan)
    # A DaemonSet's pods always restart: the probe runs as an init container that exits 0 whatever
    # the verdict (--exit-zero; the verdict is in its JSON log), then the pod idles until deleted.
    probe = _container(plan, mounts, "--exit-zero")
    idle = {
        "name": "idle",
        "image": plan.image,
        "command": [plan.python, "-c", "import signal; signal.pause()"],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
    }
    pod: dict[str, Any] = {
        **_placement(None),
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [*inits, probe],
        "containers": [idle],
        "volumes": volumes,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": plan.namespace, "labels": labels},
        "spec": {"selector": {"matchLabels": {RUN_LABEL: plan.run_id}}, "template": {"metadata": {"labels": labels}, "spec": pod}},
    }


def render(plan: K8sPlan) -> list[dict[str, Any]]:
    """The manifests: a DaemonSet, or one Indexed Job per node group. Raises UsageError on a bad plan."""
    plan.check()
    if plan.daemonset:
        return [_daemonset(plan)]
    return [_job(plan, g) for g in plan.groups if g.count > 0]


def to_text(docs: Sequence[Mapping[str, Any]], header: str) -> str:
    """One YAML stream (``kubectl apply -f``): a comment header, then each manifest as JSON."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for doc in docs:
        lines += ["---", json.dumps(doc, indent=2)]
    return "\n".join(lines) + "\n"
