"""fleet report over real reports: this CPU host probing the example package (pass) and the CUDA
example (fail: no GPU), every probe report kept under docs/ (GPU runs), a build report, and a
report cut off mid-write (no verdict); and a real one-node Slurm cluster running the array job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aoti_guard.fleet.classes import FAIL, NO_VERDICT, PASS
from aoti_guard.fleet.report import aggregate
from aoti_guard.fleet.trust import gather
from tests.conftest import wait_for_engines
from tests.integration.conftest import Built, run_cli

ROOT = Path(__file__).resolve().parents[2]
CUDA_EXAMPLE = ROOT / "tests/data/cuda_example.pt2"


def node_check(pkg: Path, node: str, report_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime_probe.node_check", str(pkg), "--node", node, "--report-dir", str(report_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def kept_probe_reports() -> list[Path]:
    """The JSON probe reports kept in the repo (GPU runs), and the build report, which is no probe's."""
    out = []
    for folder in ("docs/gpu-runs", "docs/zoo-runs"):
        for path in sorted((ROOT / folder).glob("*.json")):
            kind = json.loads(path.read_text()).get("kind")
            if kind in ("probe", "build"):
                out.append(path)
    return out


@pytest.mark.integration
def test_fleet_report_over_real_reports(example_pkg: Built, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    ok = node_check(example_pkg.path, "cpu-a", reports)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)  # stdout holds the JSON report and nothing else
    assert doc["kind"] == "probe" and doc["extra"]["fleet"]["node"] == "cpu-a"
    bad = node_check(CUDA_EXAMPLE, "cpu-b", tmp_path / "cuda")
    assert bad.returncode == 1, bad.stderr  # a verdict: the package does not fit this node
    kept = kept_probe_reports()
    for path in kept:
        shutil.copy(path, reports / f"kept-{path.name}")
    (reports / "cut.json").write_text((reports / "cpu-a.json").read_text()[:4000])  # a node died mid-write
    results = gather([str(reports)])
    fleet = aggregate(results)
    cpu = [c for c in fleet.classes if c.node_class and c.node_class.gpu == "cpu"]
    assert len(cpu) == 1 and cpu[0].verdict == PASS and cpu[0].passed == ("cpu-a",)
    assert cpu[0].node_class is not None and cpu[0].node_class.torch == doc["host"]["torch"]
    by_file = {Path(r.source).name: r for r in results}
    assert by_file["cut.json"].outcome == NO_VERDICT and "not valid JSON" in by_file["cut.json"].reason
    for path in kept:  # a kept GPU probe report gets a GPU class; a build report is nobody's verdict
        r = by_file[f"kept-{path.name}"]
        if json.loads(path.read_text())["kind"] == "probe":
            assert r.node_class is not None and r.node_class.gpu != "cpu", r
        else:
            assert r.outcome == NO_VERDICT and "kind build" in r.reason
    assert fleet.exit_code == 2  # the cut report names no class: no verdict for the fleet
    # the failing node's report, through the CLI, in its own class verdict
    proc = run_cli("fleet", "report", str(tmp_path / "cuda"), "--json", "-")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    (cls,) = data["classes"]
    assert cls["verdict"] == FAIL and cls["nodes"]["fail"] == ["cpu-b"]
    assert "env.device_unavailable" in {i["code"] for i in cls["issues"]}


def _slurm_up() -> str | None:
    wait_for_engines()  # .ci/run makes the cluster in the background
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no Slurm here: run `bash scripts/slurm/setup_local_cluster.sh` (as root) first"
    proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0 or not any(
        line.split()[1].startswith(("idle", "mixed")) for line in proc.stdout.splitlines() if line.split()[1:]
    ):
        return f"no idle Slurm node ({proc.stdout.strip() or proc.stderr.strip()}): run scripts/slurm/setup_local_cluster.sh"
    return None


@pytest.mark.integration
@pytest.mark.slurm
def test_slurm_array_probes_each_node_and_a_failing_task_is_a_failing_node(example_pkg: Built, tmp_path: Path) -> None:
    why = _slurm_up()
    if why:
        pytest.skip(why)
    node = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True).stdout.split()[0]
    shared = tmp_path / "shared"  # one host: its own disk is the shared file system
    shared.mkdir()
    os.chmod(tmp_path, 0o755)
    verdicts = {}
    for name, pkg in (("good", example_pkg.path), ("cuda", CUDA_EXAMPLE)):
        reports = shared / f"reports-{name}"
        proc = run_cli(
            "fleet", "slurm", str(pkg), "--reports", str(reports), "--nodelist", node, "--python", sys.executable,
            "--cpus", "1", "--mem", "1G", "--time", "00:15:00", "-o", str(shared / f"scripts-{name}"),
            "--submit", "--wait", "--wait-timeout", "600",
        )  # fmt: skip
        job = proc.stdout.splitlines()[0]
        assert job.isdigit(), proc.stdout + proc.stderr
        task = subprocess.run(["scontrol", "show", "job", f"{job}_0"], capture_output=True, text=True).stdout
        verdicts[name] = (proc.returncode, proc.stdout, task, reports)
    code, out, task, reports = verdicts["good"]
    assert code == 0, out
    assert f"NodeList={node}" in task and "ExitCode=0:0" in task
    assert (reports / f"{node}.json").is_file() and "PASSED: 1 class(es) pass" in out
    code, out, task, reports = verdicts["cuda"]
    assert "ExitCode=1:0" in task, task  # the task failed, as Slurm sees it...
    assert code == 1 and "FAILED: 0 class(es) pass, 1 fail, 0 without a verdict" in out, out  # ...a failing node, not a tool error
    assert "env.device_unavailable" in out
