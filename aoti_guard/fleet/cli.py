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
from typing import Any

import click

from aoti_guard.flags import flag_options
from aoti_guard.fleet import k8s, kube, slurm
from aoti_guard.fleet.flags import K8S_FLAGS, SLURM_FLAGS, K8sArgs, SlurmArgs
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


def _groups(args: K8sArgs) -> tuple[k8s.NodeGroup, ...]:
    """The node classes to probe: none for a DaemonSet; one from --select; one per class of
    --nodes-json (or, with --apply, of the cluster's nodes)."""
    if args.daemonset:
        return ()
    if args.nodes_json and args.selects:
        raise UsageError("give --nodes-json or --select, not both")
    if args.selects:
        return (_selected(args.selects, args.count),)
    if args.nodes_json:
        return tuple(k8s.groups_from_nodes(_read_nodes_json(args.nodes_json)))
    if args.apply:
        return tuple(k8s.groups_from_nodes(kube.get_nodes()))
    raise UsageError(
        "no node class to probe", hint="give --nodes-json (kubectl get nodes -o json), or --select LABEL=VALUE --count N, or --daemonset"
    )


def _selected(selects: tuple[str, ...], count: int | None) -> k8s.NodeGroup:
    labels = {}
    for item in selects:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--select {item!r}: write LABEL=VALUE", hint="e.g. --select nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
        labels[key] = value
    if not count:
        raise UsageError("--select needs --count N: how many nodes carry those labels (one pod each)")
    return k8s.NodeGroup(labels, count)


def _read_nodes_json(nodes_json: str) -> dict[str, Any]:
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
    return doc


@fleet.command("k8s", context_settings=CONTEXT)
@click.argument("package", metavar="PKG")
@flag_options(K8S_FLAGS)
def k8s_cmd(package: str, **values: Any) -> None:
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
    args = K8sArgs.from_values(package, values)
    rid = _run_id(args.run_id)
    output = os.path.join(args.reports, f"fleet-{rid}.yaml") if args.apply and args.output == STDOUT else args.output
    plan = args.plan(rid, _groups(args))
    _write_manifests(plan, output)
    if args.apply:
        sys.exit(_apply(args, rid, output))


def _write_manifests(plan: k8s.K8sPlan, output: str) -> None:
    docs = k8s.render(plan)
    classes = ", ".join(f"{name} x{g.count}" for g, name in zip(plan.groups, k8s.class_names(plan.groups))) or "every node (DaemonSet)"
    header = (
        f"aoti-guard fleet k8s: probe {plan.package} (run {plan.run_id}); node classes: {classes}\n"
        "kubectl apply -f THIS; then: aoti-guard fleet report REPORTS"
    )
    text = k8s.to_text(docs, header)
    if output != STDOUT:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    write_output(output, text.encode())


def _apply(args: K8sArgs, rid: str, output: str) -> int:
    """kubectl apply the manifests, wait for the pods, collect their reports: the fleet verdict's exit code."""
    click.echo(kube.apply(output, args.namespace), err=True, nl=False)
    finished = kube.wait(args.namespace, rid, args.daemonset, args.wait_timeout_s)
    if not finished:
        click.echo(f"warning: not every pod finished within {args.wait_timeout_s} s: those count as no verdict", err=True)
    written = kube.collect(args.namespace, rid, args.reports)
    click.echo(f"collected {len(written)} pod report(s) into {args.reports}", err=True)
    return _report([args.reports], None, None, False)


@fleet.command("slurm", context_settings=CONTEXT)
@click.argument("package", metavar="PKG")
@flag_options(SLURM_FLAGS)
def slurm_cmd(package: str, **values: Any) -> None:
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
    args = SlurmArgs.from_values(package, values)
    if args.wait and not args.submit:
        raise UsageError("--wait needs --submit")
    plan = args.plan()
    plan.check()
    submit_sh = _write_scripts(plan, args.out_dir)
    if not args.submit:
        word = slurm.shell_word  # a command line to copy: each value one quoted word
        click.echo(f"submit with: bash {word(submit_sh, '-o')}; then: aoti-guard fleet report {word(args.reports, '--reports')}", err=True)
        return
    done = slurm.submit(submit_sh)
    click.echo(done.message or f"submitted array {done.job_id}", err=True)
    click.echo(done.job_id)
    if not args.wait:
        return
    if not slurm.wait(done.job_id, args.wait_timeout_s):
        click.echo(f"warning: array {done.job_id} still has tasks after {args.wait_timeout_s} s: their nodes count as no verdict", err=True)
    sys.exit(_report([args.reports], None, None, False))


def _write_scripts(plan: slurm.SlurmPlan, out_dir: str) -> str:
    """Write OUT/probe.sbatch, OUT/submit.sh and OUT/prolog.sh, each rendered (and every value
    checked) before any is written; the path of submit.sh."""
    batch = os.path.abspath(os.path.join(out_dir, "probe.sbatch"))
    submit_sh = os.path.join(out_dir, "submit.sh")
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
    return submit_sh
