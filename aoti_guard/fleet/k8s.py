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

Every field is checked at render time against what the API server accepts (names, labels, paths,
unique mount paths), so a plan it would reject is a usage error here, with a hint, not a failed
``kubectl apply`` halfway through a fleet; two node classes never share one Job's name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.fleet.classes import obj
from aoti_guard.fleet.slurm import plain_value
from runtime_probe.reporting.errors import UsageError

__all__ = ["GFD_LABELS", "K8sPlan", "NodeGroup", "class_names", "groups_from_nodes", "render", "to_text"]

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
# the API server's own rules (k8s.io/apimachinery/pkg/util/validation)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a namespace, a run id
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")  # a PVC
_LABEL_NAME = re.compile(r"^(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^((?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_MAX_COMPLETIONS = 100_000  # an Indexed Job's completions and parallelism
TMP_MOUNT = "/tmp"  # the probe's scratch emptyDir (AOTI unpacks and dlopen()s its .so there)


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


def class_names(groups: Sequence[NodeGroup]) -> tuple[str, ...]:
    """Each group's name, unique: classes whose label values slug alike (``NVIDIA H100`` and
    ``nvidia-h100``) get a short hash of their exact labels, so that each has a Job of its own
    (with one name, the second Job replaced the first and that class was never probed)."""
    names = [g.name for g in groups]
    if len(set(names)) == len(names):
        return tuple(names)
    out = []
    for g, name in zip(groups, names):
        if names.count(name) > 1:
            exact = json.dumps(sorted(g.labels.items()))
            name = _slug(f"{name}-{hashlib.sha256(exact.encode()).hexdigest()[:6]}", 40)
        out.append(name)
    if len(set(out)) != len(out):  # one set of labels given twice (a library caller's plan)
        twice = sorted({n for n in out if out.count(n) > 1})
        raise UsageError(f"the node classes {', '.join(twice)} are given twice with the same labels", hint="give each class once")
    return tuple(out)


def _label_problem(key: str, value: str) -> str | None:
    """Why the API server would refuse ``key=value`` as a label (a nodeSelector), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and not _DNS_SUBDOMAIN.match(prefix):
        return f"the prefix {prefix!r} of the label key is not a DNS subdomain"
    if not _LABEL_NAME.match(name):
        return f"the label key {key!r} is not a label name (at most 63 of [A-Za-z0-9._-], starting and ending alphanumeric)"
    if not _LABEL_VALUE.match(value):
        return f"the label value {value!r} is not a label value (at most 63 of [A-Za-z0-9._-], starting and ending alphanumeric)"
    return None


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
        """Raise UsageError for a plan the API server would reject, or one whose values could
        inject lines into the manifest (a control character) or its command line."""
        for flag, value in (
            ("PKG", self.package),
            ("--image", self.image),
            ("--namespace", self.namespace),
            ("--pvc", self.pvc),
            ("--host-path", self.host_path),
            ("--package-image", self.package_image),
            ("--probe-args", self.probe_args),
            ("python", self.python),
        ):
            if value is not None:
                plain_value(value, flag)
        if not os.path.isabs(self.package) or os.path.basename(self.package) in ("", ".", ".."):
            raise UsageError(f"PKG {self.package!r} must be the package's absolute path inside the pod", hint="e.g. /models/model.pt2")
        for flag, image in (("--image", self.image), ("--package-image", self.package_image)):
            if image is not None and not _IMAGE.match(image):
                raise UsageError(f"{flag} {image!r} is not an image reference", hint="e.g. registry.example/my-server:1.2-preflight")
        if not _DNS_LABEL.match(self.namespace):
            raise UsageError(
                f"--namespace {self.namespace!r} is not a Kubernetes namespace (a DNS-1123 label)",
                hint="at most 63 lowercase letters, digits and '-', starting and ending alphanumeric, e.g. ml-serving",
            )
        if not _DNS_LABEL.match(self.run_id) or len(self.run_id) > 32:
            raise UsageError(f"--run-id {self.run_id!r} is not a short DNS label", hint="lowercase letters, digits and '-', at most 32")
        if sum(x is not None for x in (self.pvc, self.host_path, self.package_image)) > 1:
            raise UsageError("give one package source: --pvc, --host-path or --package-image (or none: the package is in --image)")
        self._check_paths()
        try:
            shlex.split(self.probe_args)
        except ValueError as exc:
            raise UsageError(
                f"--probe-args {self.probe_args!r} does not parse as shell words ({exc})", hint="e.g. '--fast --timeout 600'"
            ) from None
        if not self.daemonset and not self.groups:
            raise UsageError(
                "no node class to probe",
                hint="give --nodes-json (kubectl get nodes -o json), or --select LABEL=VALUE --count N, or --daemonset",
            )
        for group in () if self.daemonset else self.groups:
            for key, value in group.labels.items():
                why = _label_problem(key, value)
                if why:
                    raise UsageError(f"node selector {key}={value}: {why}", hint="copy the label from kubectl get nodes --show-labels")
            if group.count > _MAX_COMPLETIONS:
                raise UsageError(f"{group.count} nodes in one class: an Indexed Job runs at most {_MAX_COMPLETIONS}")
        if self.gpus < 0 or self.retries < 0:
            raise UsageError("--gpus and --retries must be 0 or more")

    def _check_paths(self) -> None:
        """The package source's paths: a hostPath the kubelet can mount, and a mount point that
        neither hides the image's root nor takes the probe's /tmp."""
        if self.pvc is not None and not _DNS_SUBDOMAIN.match(self.pvc):
            raise UsageError(f"--pvc {self.pvc!r} is not a PersistentVolumeClaim name", hint="lowercase letters, digits, '-' and '.'")
        if self.host_path is not None:
            parts = self.host_path.split("/")
            if not os.path.isabs(self.host_path) or ".." in parts or os.path.normpath(self.host_path) == "/":
                raise UsageError(
                    f"--host-path {self.host_path!r} must be an absolute folder on every node, not / and without '..'",
                    hint="e.g. --host-path /srv/models (the folder that holds the package)",
                )
        if self.pvc or self.host_path or self.package_image:
            mount = _mount_point(self.package)
            why = {
                "/": "a volume mounted at / would hide the image's own files (python, torch), and the runtime refuses it",
                TMP_MOUNT: f"{TMP_MOUNT} is the probe's scratch volume already, and two volumes at one path are refused",
            }.get(mount)
            if why:
                raise UsageError(
                    f"PKG {self.package!r}: the package's volume is mounted at its folder, {mount}, and {why}",
                    hint="give PKG in a folder of its own, e.g. /models/model.pt2",
                )


def _mount_point(package: str) -> str:
    """Where the package's volume is mounted: PKG's folder, normalised (``/a/../b`` is ``/b``)."""
    return os.path.normpath(os.path.dirname(package))


def _literal(value: str) -> str:
    """``value`` in a container's command: Kubernetes expands ``$(VAR)`` there, ``$$`` is one ``$``."""
    return value.replace("$", "$$")


def _labels(plan: K8sPlan, group: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "aoti-guard-fleet", RUN_LABEL: plan.run_id, CLASS_LABEL: group, **plan.extra_labels}


def _command(plan: K8sPlan, *extra: str) -> list[str]:
    """node_check's argv. ``--probe-args=FLAGS`` is one word: as two, argparse takes a value that
    starts with ``-`` (``--fast``) for an option and refuses it (exit 2: every pod retried, no verdict)."""
    args = [_literal(plan.python), "-m", "runtime_probe.node_check", _literal(plan.package)]
    args += ["--node", "$(NODE_NAME)", "--deadline", str(plan.deadline_s)]
    if plan.probe_args:
        args.append(f"--probe-args={_literal(plan.probe_args)}")
    return [*args, *extra]


def _volumes(plan: K8sPlan) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, the probe's mounts, init containers that bring the package)."""
    pkg_dir = _mount_point(plan.package)
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "16Gi"}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": TMP_MOUNT}]  # AOTI unpacks and dlopen()s its .so there
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
                "command": ["cp", _literal(plan.package), "/aoti-package/"],
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


def _job(plan: K8sPlan, group: NodeGroup, class_name: str) -> dict[str, Any]:
    name = _slug(f"aoti-guard-{plan.run_id}-{class_name}", 52)  # the job-name label + pod suffixes stay under 63
    labels = _labels(plan, class_name)
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
    return [_job(plan, g, name) for g, name in zip(plan.groups, class_names(plan.groups)) if g.count > 0]


def to_text(docs: Sequence[Mapping[str, Any]], header: str) -> str:
    """One YAML stream (``kubectl apply -f``): a comment header, then each manifest as JSON."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for doc in docs:
        lines += ["---", json.dumps(doc, indent=2)]
    return "\n".join(lines) + "\n"
