"""``aoti-guard fleet``: probe a package on every node class through Kubernetes or Slurm, one verdict per class.

The click commands only; the work is in the modules beside this one. Errors are raised as
runtime_probe's GuardError (UsageError: exit 2, ToolError: exit 3) and printed by aoti_guard.cli.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Sequence

import click

from aoti_guard.fleet import k8s, kube, slurm
from aoti_guard.fleet.report import aggregate, render_json, render_markdown, render_text
from aoti_guard.fleet.sources import Limits
from aoti_guard.fleet.trust import check_one_package, gather
from runtime_probe.reporting.errors import ToolError, UsageError
from runtime_probe.reporting.output import STDOUT, write_atomic, write_output
from runtime_probe.reporting.report import clean

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
_LIMITS = Limits()


@click.group(context_settings=CONTEXT)
def fleet() -> None:
    """Probe one package on every kind of node of a fleet, one verdict per node class.

    \b
    k8s     render (and with --apply run) an Indexed Job per node class, or a DaemonSet
    slurm   write (and with --submit submit) an sbatch array: one task per node, and a prolog
    report  aggregate the nodes' JSON reports: which classes pass, fail, or gave no verdict

    Each node runs `python -m runtime_probe.node_check PKG`: its JSON report on stdout, exit 0
    (passes here), 1 (does not: keep this node out), 2 (no verdict). A node class is the GPU product
    and compute capability, driver and CUDA, libstdc++, torch and the machine (docs/fleet.md).
    """


def _emit(report_text: str, path: str | None) -> None:
    if path is not None:
        write_output(path, report_text.encode())


def _report(paths: Sequence[str], json_path: str | None, md_path: str | None, any_package: bool) -> int:
    if json_path is not None and json_path == md_path:
        raise UsageError(f"--json and --markdown both write {json_path}", hint="give each its own path; at most one may be '-'")
    results = gather(paths, _LIMITS)
    if not any_package:
        check_one_package(results)
    fleet_report = aggregate(results)
    if STDOUT not in (json_path, md_path):
        click.echo(render_text(fleet_report), nl=False)
    _emit(render_json(fleet_report), json_path)
    _emit(render_markdown(fleet_report), md_path)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if md_path is not None and summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(render_markdown(fleet_report))
    return fleet_report.exit_code


@fleet.command("report", context_settings=CONTEXT)
@click.argument("reports", nargs=-1, required=True, metavar="REPORTS...")
@click.option("--json", "json_path", metavar="PATH", help="Write the fleet verdict as JSON here ('-': stdout).")
@click.option(
    "--markdown", "md_path", metavar="PATH", help="Write a Markdown summary here ('-': stdout; also appended to $GITHUB_STEP_SUMMARY)."
)
@click.option(
    "--max-bytes",
    type=click.IntRange(1),
    default=_LIMITS.max_bytes,
    show_default=True,
    help="A larger report file is refused (no verdict).",
)
@click.option(
    "--max-files", type=click.IntRange(1), default=_LIMITS.max_files, show_default=True, help="At most this many report files per run."
)
@click.option("--any-package", is_flag=True, help="Group reports of different packages together (normally refused).")
def report_cmd(
    reports: tuple[str, ...], json_path: str | None, md_path: str | None, max_bytes: int, max_files: int, any_package: bool
) -> None:
    """One verdict per node class from the nodes' JSON reports (files, or folders of *.json).

    \b
    Exit codes (NVIDIA's health-check convention):
      0  every class passed
      1  a class failed: its nodes must not serve this package (the findings say why)
      2  no failure, but something gave no verdict: a class none of whose nodes answered,
         or a report that names no class (corrupt, truncated, a symlink, the probe died)
    A node's latest report counts; a class passes when none of its nodes failed and one passed.

    \b
    examples:
      aoti-guard fleet report /shared/aoti-reports/
      aoti-guard fleet report reports/*.json --json fleet.json --markdown fleet.md
      aoti-guard fleet report reports/ --json - | jq '.classes[] | select(.verdict != "pass")'
    """
    global _LIMITS
    _LIMITS = Limits(max_bytes=max_bytes, max_files=max_files)
    sys.exit(_report(reports, json_path, md_path, any_package))


def _run_id(value: str | None) -> str:
    run_id = value or time.strftime("%Y%m%d-%H%M%S")
    if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?", run_id):
        raise UsageError(
            f"--run-id {run_id!r} is not a short DNS label", hint="lowercase letters, digits and '-', at most 32, e.g. v1-2-rollout"
        )
    return run_id


def _groups(
    nodes_json: str | None, selects: tuple[str, ...], count: int | None, daemonset: bool, apply_: bool
) -> tuple[k8s.NodeGroup, ...]:
    if daemonset:
        return ()
    if nodes_json and selects:
        raise UsageError("give --nodes-json or --select, not both")
    if selects:
        labels = {}
        for item in selects:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise UsageError(f"--select {item!r}: write LABEL=VALUE", hint="e.g. --select nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
            labels[key] = value
        if not count:
            raise UsageError("--select needs --count N: how many nodes carry those labels (one pod each)")
        return (k8s.NodeGroup(labels, count),)
    if nodes_json:
        try:
            with open(nodes_json, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"cannot read --nodes-json {clean(nodes_json)} ({clean(exc)})", hint="write it with: kubectl get nodes -o json > nodes.json"
            ) from None
        except RecursionError:  # json's parser recurses once per level: a hostile file's depth is a usage error
            raise UsageError(
                f"--nodes-json {clean(nodes_json)} is nested too deeply to be kubectl's node list",
                hint="write it with: kubectl get nodes -o json > nodes.json",
            ) from None
        if not isinstance(doc, dict):
            raise UsageError(
                f"--nodes-json {clean(nodes_json)} is not a JSON object", hint="write it with: kubectl get nodes -o json > nodes.json"
            )
        return tuple(k8s.groups_from_nodes(doc))
    if apply_:
        return tuple(k8s.groups_from_nodes(kube.get_nodes()))
    raise UsageError(
        "no node class to probe", hint="give --nodes-json (kubectl get nodes -o json), or --select LABEL=VALUE --count N, or --daemonset"
    )


@fleet.command("k8s", context_settings=CONTEXT)
@click.argument("package", metavar="PKG")
@click.option(
    "--image", required=True, help="The probe image: python, torch and runtime_probe (e.g. your serving image's pre-flight image)."
)
@click.option(
    "--nodes-json",
    metavar="FILE",
    help="`kubectl get nodes -o json`: one Job per class of GFD labels (product, compute capability, driver).",
)
@click.option("--select", "selects", multiple=True, metavar="LABEL=VALUE", help="One class by node labels (repeat), with --count.")
@click.option("--count", type=click.IntRange(1), help="How many nodes the --select class has (one pod per node).")
@click.option("--daemonset", is_flag=True, help="One DaemonSet on every node instead of a Job per class.")
@click.option("--pvc", help="The package from this PersistentVolumeClaim, mounted read-only at PKG's folder.")
@click.option("--host-path", metavar="DIR", help="The package from this folder on every node, mounted read-only at PKG's folder.")
@click.option("--package-image", metavar="IMG", help="The package from this image (an init container copies PKG out of it).")
@click.option(
    "--gpus",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="GPUs each pod requests; 0 takes none from serving pods (it still sees them).",
)
@click.option("--namespace", default="default", show_default=True)
@click.option("--probe-args", default="", metavar="ARGS", help="The probe's flags, e.g. '--fast --timeout 600'.")
@click.option(
    "--retries", type=click.IntRange(0), default=2, show_default=True, help="Reruns per node of a run that gave no verdict (exit 2)."
)
@click.option(
    "--deadline", type=click.IntRange(60), default=3600, show_default=True, metavar="S", help="Seconds one node's probe may take."
)
@click.option("--run-id", help="Labels this run's objects (default: the time, e.g. 20261125-101500).")
@click.option("-o", "--output", default="-", show_default=True, metavar="FILE", help="Where the manifests go ('-': stdout).")
@click.option(
    "--apply", "apply_", is_flag=True, help="kubectl apply them, wait, collect each pod's report into --reports, print the fleet verdict."
)
@click.option("--reports", default="aoti-fleet-reports", show_default=True, metavar="DIR", help="With --apply: where the pods' reports go.")
@click.option(
    "--wait-timeout", type=click.IntRange(1), default=7200, show_default=True, metavar="S", help="With --apply: how long to wait."
)
def k8s_cmd(
    package: str,
    image: str,
    nodes_json: str | None,
    selects: tuple[str, ...],
    count: int | None,
    daemonset: bool,
    pvc: str | None,
    host_path: str | None,
    package_image: str | None,
    gpus: int,
    namespace: str,
    probe_args: str,
    retries: int,
    deadline: int,
    run_id: str | None,
    output: str,
    apply_: bool,
    reports: str,
    wait_timeout: int,
) -> None:
    """Render the Kubernetes manifests that probe PKG on each node class (and run them with --apply).

    PKG is the package's path inside the pod. Each pod runs `python -m runtime_probe.node_check`;
    podFailurePolicy maps its exit: 1 (does not fit the node) ends that node's index, never
    retried; 2 (no verdict) is retried --retries times; a drained node is ignored.

    \b
    examples:
      kubectl get nodes -o json > nodes.json
      aoti-guard fleet k8s /models/model.pt2 --image registry.example/server:1.2-preflight \\
          --nodes-json nodes.json --pvc models -o fleet.yaml
      aoti-guard fleet k8s /models/model.pt2 --image IMG --select nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --count 16
      aoti-guard fleet k8s /models/model.pt2 --image IMG --pvc models --apply --reports reports/
    """
    rid = _run_id(run_id)
    if apply_ and output == STDOUT:
        output = os.path.join(reports, f"fleet-{rid}.yaml")
    plan = k8s.K8sPlan(
        package=package,
        image=image,
        run_id=rid,
        groups=_groups(nodes_json, selects, count, daemonset, apply_),
        namespace=namespace,
        daemonset=daemonset,
        pvc=pvc,
        host_path=host_path,
        package_image=package_image,
        gpus=gpus,
        probe_args=probe_args,
        retries=retries,
        deadline_s=deadline,
    )
    docs = k8s.render(plan)
    classes = ", ".join(f"{name} x{g.count}" for g, name in zip(plan.groups, k8s.class_names(plan.groups))) or "every node (DaemonSet)"
    header = f"aoti-guard fleet k8s: probe {package} (run {rid}); node classes: {classes}\nkubectl apply -f THIS; then: aoti-guard fleet report REPORTS"
    text = k8s.to_text(docs, header)
    if output != STDOUT:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    write_output(output, text.encode())
    if not apply_:
        return
    click.echo(kube.apply(output, namespace), err=True, nl=False)
    finished = kube.wait(namespace, rid, daemonset, wait_timeout)
    if not finished:
        click.echo(f"warning: not every pod finished within {wait_timeout} s: those count as no verdict", err=True)
    written = kube.collect(namespace, rid, reports)
    click.echo(f"collected {len(written)} pod report(s) into {reports}", err=True)
    sys.exit(_report([reports], None, None, False))


@fleet.command("slurm", context_settings=CONTEXT)
@click.argument("package", metavar="PKG")
@click.option("--reports", required=True, metavar="DIR", help="The shared folder every node writes NODE.json into (absolute).")
@click.option("--nodelist", metavar="HOSTLIST", help="The nodes to probe, one task each: gpu[01-16],cpu01.")
@click.option("--constraint", metavar="FEATURE", help="Probe every node with this feature, one task each.")
@click.option("--python", default="python3", show_default=True, help="The interpreter on the nodes (runtime_probe and torch importable).")
@click.option("--probe-args", default="", metavar="ARGS", help="The probe's flags, e.g. '--fast'.")
@click.option("--partition")
@click.option("--time", "time_limit", default="01:00:00", show_default=True, help="Each task's --time.")
@click.option("--gpus", type=click.IntRange(0), default=0, show_default=True, help="--gres=gpu:N per task (0: none).")
@click.option("--cpus", type=click.IntRange(1), default=2, show_default=True)
@click.option("--mem", default="8G", show_default=True)
@click.option("-o", "--out-dir", default="aoti-fleet-slurm", show_default=True, metavar="DIR", help="Where the scripts go.")
@click.option("--submit", is_flag=True, help="Submit the array (sbatch --hold, pin each task to its node, release).")
@click.option("--wait", "wait_", is_flag=True, help="With --submit: wait for every task, then print the fleet verdict from --reports.")
@click.option("--wait-timeout", type=click.IntRange(1), default=7200, show_default=True, metavar="S")
def slurm_cmd(
    package: str,
    reports: str,
    nodelist: str | None,
    constraint: str | None,
    python: str,
    probe_args: str,
    partition: str | None,
    time_limit: str,
    gpus: int,
    cpus: int,
    mem: str,
    out_dir: str,
    submit: bool,
    wait_: bool,
    wait_timeout: int,
) -> None:
    """Write an sbatch array job that probes PKG on one node per task (and a prolog); --submit runs it.

    PKG and --reports are absolute paths on a file system every node mounts. Writes
    OUT/probe.sbatch, OUT/submit.sh (submits the array held, pins task i to node i, releases it)
    and OUT/prolog.sh (slurm.conf Prolog=: drains a node the package fails on).
    A task that exits 1 is a node the package does not fit, a verdict: read the reports.

    \b
    examples:
      aoti-guard fleet slurm /shared/models/model.pt2 --reports /shared/aoti-reports --nodelist 'gpu[01-16]'
      aoti-guard fleet slurm /shared/models/model.pt2 --reports /shared/aoti-reports --constraint h100 --gpus 1 --submit --wait
      aoti-guard fleet report /shared/aoti-reports
    """
    if wait_ and not submit:
        raise UsageError("--wait needs --submit")
    plan = slurm.SlurmPlan(
        package=package,
        reports=reports,
        nodelist=nodelist,
        constraint=constraint,
        python=python,
        probe_args=probe_args,
        partition=partition,
        time_limit=time_limit,
        gpus=gpus,
        cpus=cpus,
        mem=mem,
    )
    plan.check()
    batch = os.path.abspath(os.path.join(out_dir, "probe.sbatch"))
    submit_sh = os.path.join(out_dir, "submit.sh")
    # every script is rendered (and every value checked) before anything is written
    scripts = {
        batch: slurm.render_batch(plan),
        submit_sh: slurm.render_submit(plan, batch),
        os.path.join(out_dir, "prolog.sh"): slurm.render_prolog(plan),
    }
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise ToolError(f"cannot create {clean(out_dir)} ({exc.strerror})") from None
    for path, text in scripts.items():
        write_atomic(path, text.encode(), mode=0o755)
    click.echo(f"wrote {clean(', '.join(scripts))}", err=True)
    if not submit:
        word = slurm.shell_word  # a command line to copy: each value one quoted word
        click.echo(f"submit with: bash {word(submit_sh, '-o')}; then: aoti-guard fleet report {word(reports, '--reports')}", err=True)
        return
    done = slurm.submit(submit_sh)
    click.echo(done.message or f"submitted array {done.job_id}", err=True)
    click.echo(done.job_id)
    if not wait_:
        return
    if not slurm.wait(done.job_id, wait_timeout):
        click.echo(f"warning: array {done.job_id} still has tasks after {wait_timeout} s: their nodes count as no verdict", err=True)
    sys.exit(_report([reports], None, None, False))
