"""fleet k8s: the manifests validate against two Kubernetes versions' API schemas (offline), map our
exit codes in podFailurePolicy, take no GPU unless asked; --apply runs a fake kubectl on PATH."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from aoti_guard.cli import main
from aoti_guard.fleet import k8s

yaml = pytest.importorskip("yaml")  # the [test] extra; under CI a skip fails (tests/conftest.py)
kv = pytest.importorskip("kubernetes_validate")

VERSIONS = ("1.31.0", "1.37.0")  # podFailurePolicy + backoffLimitPerIndex (1.31: beta), the newest schema
H100 = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.compute.major": "9",
    "nvidia.com/gpu.compute.minor": "0",
    "nvidia.com/cuda.driver.major": "580",
}


def node(name: str, labels: dict[str, str], unschedulable: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}, "spec": {"unschedulable": unschedulable}}


NODES = {
    "items": [
        node("g1", H100),
        node("g2", H100),
        node("g3", {**H100, "nvidia.com/cuda.driver.major": "570"}),
        node("c1", {}),
        node("c2", {}, True),
    ]
}


def rendered(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    out = tmp_path / "fleet.yaml"
    assert (
        main(
            [
                "fleet",
                "k8s",
                "/models/model.pt2",
                "--image",
                "registry.example/server:1.2-preflight",
                "--run-id",
                "r1",
                "-o",
                str(out),
                *args,
            ]
        )
        == 0
    )
    return [d for d in yaml.safe_load_all(out.read_text()) if d]


@pytest.mark.parametrize(
    "args",
    [
        ("--nodes-json", "NODES", "--pvc", "models"),
        ("--daemonset", "--package-image", "registry.example/pkg:1"),
        ("--select", "a=b", "--count", "2", "--host-path", "/models", "--gpus", "1"),
    ],
    ids=["jobs-pvc", "daemonset-image", "select-hostpath-gpu"],
)
def test_manifests_validate_against_two_kubernetes_versions(tmp_path: Path, args: tuple[str, ...]) -> None:
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps(NODES))
    docs = rendered(tmp_path, *(str(nodes) if a == "NODES" else a for a in args))
    assert docs
    for version in VERSIONS:
        for doc in docs:
            kv.validate(doc, version, strict=True)  # raises with the schema's own words


def test_one_job_per_gfd_class_with_exit_codes_mapped(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps(NODES))
    jobs = {d["metadata"]["labels"][k8s.CLASS_LABEL]: d for d in rendered(tmp_path, "--nodes-json", str(nodes))}
    assert set(jobs) == {"nvidia-h100-80gb-hbm3-sm90-drv580", "nvidia-h100-80gb-hbm3-sm90-drv570", "cpu"}  # c2 is cordoned
    h100 = jobs["nvidia-h100-80gb-hbm3-sm90-drv580"]["spec"]
    assert (h100["completionMode"], h100["completions"], h100["parallelism"]) == ("Indexed", 2, 2)
    pod = h100["template"]["spec"]
    assert pod["nodeSelector"] == H100 and pod["restartPolicy"] == "Never"
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"  # one pod per node
    rules = {r["action"]: r for r in h100["podFailurePolicy"]["rules"]}
    assert rules["FailIndex"]["onExitCodes"]["values"] == [1]  # does not fit: never retried
    assert rules["Count"]["onExitCodes"]["values"] == [2]  # no verdict: retried
    assert rules["Ignore"]["onPodConditions"][0]["type"] == "DisruptionTarget"
    (probe,) = pod["containers"]
    assert "nvidia.com/gpu" not in probe["resources"]["limits"]  # no GPU taken from serving pods
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in probe["env"]
    assert probe["command"][:4] == ["python3", "-m", "runtime_probe.node_check", "/models/model.pt2"]
    cpu = jobs["cpu"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    term = cpu["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term == {"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"}
    (gpu_job,) = rendered(tmp_path, "--select", "a=b", "--count", "1", "--gpus", "1")
    assert gpu_job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["relative.pt2", "--image", "i", "--daemonset"], "absolute path inside the pod"),
        (["/m.pt2", "--image", "i"], "no node class to probe"),
        (["/m.pt2", "--image", "i", "--select", "a=b"], "--select needs --count"),
        (["/m.pt2", "--image", "i", "--daemonset", "--pvc", "a", "--host-path", "/b"], "one package source"),
        (["/m.pt2", "--image", "i; rm -rf /", "--daemonset"], "not an image reference"),
        (["/m.pt2", "--image", "i", "--daemonset", "--run-id", "Bad_ID"], "not a short DNS label"),
        # issue 40: what the API server (or the runtime) would refuse is refused at render time
        (["/m/m.pt2", "--image", "i", "--daemonset", "--namespace", "Bad_NS"], "not a Kubernetes namespace"),
        (["/m/m.pt2", "--image", "i", "--daemonset", "--namespace", "a" * 64], "not a Kubernetes namespace"),
        (["/m/m.pt2", "--image", "i", "--daemonset", "--host-path", "models"], "--host-path 'models' must be an absolute folder"),
        (["/m/m.pt2", "--image", "i", "--daemonset", "--host-path", "/"], "not /"),
        (["/m/m.pt2", "--image", "i", "--daemonset", "--host-path", "/srv/../etc"], "without '..'"),
        (["/m.pt2", "--image", "i", "--daemonset", "--pvc", "models"], "mounted at its folder, /,"),
        (["/tmp/m.pt2", "--image", "i", "--daemonset", "--host-path", "/srv"], "the probe's scratch volume"),
        (["/m/m.pt2", "--image", "i", "--daemonset", "--pvc", "Models_1"], "not a PersistentVolumeClaim name"),
        (["/m/m.pt2", "--image", "i", "--select", "gpu=a b", "--count", "1"], "not a label value"),
        (["/m/m.pt2", "--image", "i", "--select", "bad key=x", "--count", "1"], "not a label name"),
        (["/m/m.pt2\n---\nkind: Pod", "--image", "i", "--daemonset"], "PKG holds the control character"),
        (["/m/m.pt2", "--image", "i", "--daemonset", "--probe-args", "--fast 'open"], "does not parse"),
    ],
)
def test_user_mistakes_exit_2_with_a_hint(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "k8s", *args]) == 2
    assert message in capsys.readouterr().err


FAKE_KUBECTL = r"""#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as fh:
    fh.write(json.dumps(args) + "\n")
data = os.environ["FAKE_KUBECTL_DATA"]
if args[0] == "apply":
    print("job.batch/aoti-guard-r1-x created")
elif args[:2] == ["get", "jobs"]:
    print(json.dumps({"items": [{"status": {"conditions": [{"type": "Complete", "status": "True"}]}}]}))
elif args[:2] == ["get", "pods"]:
    term = {"terminated": {"exitCode": 0}}
    pods = [
        {"metadata": {"name": "p-ok"}, "spec": {"nodeName": "g1"}, "status": {"phase": "Succeeded", "containerStatuses": [{"name": "probe", "state": term}]}},
        {"metadata": {"name": "p-gone"}, "spec": {"nodeName": "g2"}, "status": {"phase": "Failed", "containerStatuses": [{"name": "probe", "state": term}]}},
        {"metadata": {"name": "p-pending"}, "spec": {}, "status": {"phase": "Pending"}},
    ]
    print(json.dumps({"items": pods}))
elif args[0] == "logs":
    pod = args[args.index("-n") + 2]
    if pod == "p-gone":
        sys.stderr.write("Error from server (NotFound): the node is gone\n")
        sys.exit(1)
    sys.stdout.write(open(os.path.join(data, "report.json")).read())
else:
    sys.stderr.write("fake kubectl: unexpected %r\n" % args)
    sys.exit(9)
"""


def test_apply_with_a_fake_kubectl_collects_each_pods_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.test_fleet_report import H100 as H100_DEVICE
    from tests.unit.test_fleet_report import probe_report

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "kubectl"
    fake.write_text(FAKE_KUBECTL)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    report = probe_report("pod-name-not-node", [H100_DEVICE])
    report["extra"]["fleet"] = {"node": "g1"}
    (tmp_path / "report.json").write_text(json.dumps(report))
    log = tmp_path / "kubectl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(log))
    monkeypatch.setenv("FAKE_KUBECTL_DATA", str(tmp_path))
    reports = tmp_path / "reports"
    code = main(
        [
            "fleet",
            "k8s",
            "/models/model.pt2",
            "--image",
            "img:1",
            "--select",
            "a=b",
            "--count",
            "2",
            "--run-id",
            "r1",
            "--apply",
            "--reports",
            str(reports),
        ]
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls[0][:3] == ["apply", "-n", "default"] and calls[0][4].endswith("fleet-r1.yaml")
    assert ["get", "jobs", "-n", "default", "-l", "aoti-guard.dev/run=r1", "-o", "json"] in calls
    assert sorted(p.name for p in reports.glob("*.json")) == ["g1--p-ok.json", "g2--p-gone.json", "unscheduled--p-pending.json"]
    out = capsys.readouterr().out
    assert code == 2, out  # g1 passes its class; two pods gave no verdict and name no class
    assert "PASS       NVIDIA H100 80GB HBM3" in out
    assert "no verdict from g2: the probe left no report on the node: no readable log of pod p-gone" in out
    assert "pod p-pending is Pending" in out


def test_probe_args_are_one_word_so_node_check_takes_a_leading_dash(tmp_path: Path) -> None:
    (job,) = rendered(tmp_path, "--select", "a=b", "--count", "1", "--probe-args", "--fast")
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[-1] == "--probe-args=--fast" and "--fast" not in command  # as two words argparse refused it (exit 2)


def test_kubernetes_variable_syntax_in_a_value_stays_literal(tmp_path: Path) -> None:
    out = tmp_path / "fleet.yaml"
    assert main(["fleet", "k8s", "/models/$(HOME)/m.pt2", "--image", "i", "--daemonset", "--run-id", "r1", "-o", str(out)]) == 0
    (ds,) = [d for d in yaml.safe_load_all(out.read_text()) if d]
    command = ds["spec"]["template"]["spec"]["initContainers"][0]["command"]
    assert command[3] == "/models/$$(HOME)/m.pt2" and "$(NODE_NAME)" in command  # $$ is one literal $; NODE_NAME expands


def test_classes_whose_labels_slug_alike_get_a_job_each(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.json"
    products = ("NVIDIA-H100", "nvidia-h100", "NVIDIA_H100")
    nodes.write_text(json.dumps({"items": [node(f"n{i}", {"nvidia.com/gpu.product": p}) for i, p in enumerate(products)]}))
    jobs = rendered(tmp_path, "--nodes-json", str(nodes))
    names = [j["metadata"]["name"] for j in jobs]
    assert len(jobs) == 3 and len(set(names)) == 3, names  # one name: each Job replaced the one before
    selected = {j["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] for j in jobs}
    assert selected == set(products)
    assert len({j["metadata"]["labels"][k8s.CLASS_LABEL] for j in jobs}) == 3
    for doc in jobs:
        kv.validate(doc, VERSIONS[-1], strict=True)


def test_a_deeply_nested_nodes_json_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.json"
    nodes.write_text('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main(["fleet", "k8s", "/m/m.pt2", "--image", "i", "--nodes-json", str(nodes), "-o", str(tmp_path / "o.yaml")]) == 2
    assert "nested too deeply" in capsys.readouterr().err
