"""``fleet k8s --apply``: apply the manifests with kubectl, wait, and collect each pod's JSON report.

Every kubectl call goes through one runner (``slurm.run_command``'s shape), so the tests pass a
fake kubectl on PATH and nothing here needs a cluster. A pod's report is its probe container's
log (node_check prints only JSON on stdout); a pod that left no log (evicted, never scheduled,
its node died) becomes a ``fleet.no_verdict`` record naming its node, so ``fleet report`` counts
it as a node without a verdict instead of forgetting it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aoti_guard.fleet.classes import NO_VERDICT_KIND
from aoti_guard.fleet.k8s import CONTAINER, RUN_LABEL
from aoti_guard.fleet.slurm import Runner, run_command
from runtime_probe.reporting.errors import ToolError
from runtime_probe.reporting.output import write_atomic
from runtime_probe.reporting.paths import plain_name

__all__ = ["apply", "collect", "get_nodes", "wait"]

_LOG_LIMIT = 8 * 1024 * 1024  # one pod's report, as fleet report's --max-bytes


def _kubectl(runner: Runner, args: Sequence[str], timeout_s: float = 60.0) -> str:
    proc = runner(["kubectl", *args], timeout_s)
    if proc.returncode != 0:
        raise ToolError(
            f"kubectl {' '.join(args[:3])} failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}",
            hint="check the context and your rights: kubectl config current-context; kubectl auth can-i create jobs",
        )
    return proc.stdout


def _json(text: str, what: str) -> Mapping[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ToolError(f"kubectl {what} did not print JSON ({exc})") from None
    except RecursionError:  # json's parser recurses once per level
        raise ToolError(f"kubectl {what} printed JSON nested too deeply to be the API server's") from None
    if not isinstance(data, Mapping):
        raise ToolError(f"kubectl {what} printed JSON that is not an object")
    return data


def get_nodes(runner: Runner = run_command) -> Mapping[str, Any]:
    return _json(_kubectl(runner, ["get", "nodes", "-o", "json"]), "get nodes")


def apply(manifest: str, namespace: str, runner: Runner = run_command) -> str:
    return _kubectl(runner, ["apply", "-n", namespace, "-f", manifest], 120.0)


def _items(runner: Runner, kind: str, namespace: str, run_id: str) -> list[Mapping[str, Any]]:
    doc = _json(_kubectl(runner, ["get", kind, "-n", namespace, "-l", f"{RUN_LABEL}={run_id}", "-o", "json"]), f"get {kind}")
    items = doc.get("items")
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []


def _job_done(job: Mapping[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def _probe_state(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The probe container's terminated state (a Job's container, or a DaemonSet's init container)."""
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for c in status.get(key) or []:
            if isinstance(c, Mapping) and c.get("name") == CONTAINER:
                term = (c.get("state") or {}).get("terminated")
                return term if isinstance(term, Mapping) else None
    return None


def wait(namespace: str, run_id: str, daemonset: bool, timeout_s: float, runner: Runner = run_command, poll_s: float = 5.0) -> bool:
    """Wait until every Job finished (or, for a DaemonSet, every pod's probe ended); False at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        if daemonset:
            pods = _items(runner, "pods", namespace, run_id)
            done = bool(pods) and all(_probe_state(p) is not None for p in pods)
        else:
            jobs = _items(runner, "jobs", namespace, run_id)
            done = bool(jobs) and all(_job_done(j) for j in jobs)
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def _safe(name: str) -> str:
    return plain_name(name, "pod", limit=120)


def collect(namespace: str, run_id: str, out_dir: str, runner: Runner = run_command) -> list[str]:
    """Write each pod's report to ``out_dir/NODE--POD.json``; a pod without one, a no-verdict record."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for pod in _items(runner, "pods", namespace, run_id):
        meta = pod.get("metadata") or {}
        name = str(meta.get("name", "?"))
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        state = _probe_state(pod)
        doc: str | None = None
        if state is not None:
            proc = runner(["kubectl", "logs", "-n", namespace, name, "-c", CONTAINER], 60.0)
            if proc.returncode == 0 and proc.stdout.strip() and len(proc.stdout) <= _LOG_LIMIT:
                doc = proc.stdout
            why = f"no readable log of pod {name} (kubectl logs exit {proc.returncode}: {proc.stderr.strip()[-300:]})"
        else:
            phase = (pod.get("status") or {}).get("phase", "?")
            why = f"pod {name} is {phase}: its probe never ended (unschedulable, node lost, or the deadline passed)"
        if doc is None:
            doc = json.dumps(
                {"kind": NO_VERDICT_KIND, "node": node or "?", "reason": why, "extra": {"fleet": {"node": node or "?", "pod": name}}}
            )
        path = os.path.join(out_dir, f"{_safe(node or 'unscheduled')}--{_safe(name)}.json")
        write_atomic(path, doc.encode())
        written.append(path)
    return written
