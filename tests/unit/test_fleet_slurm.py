"""fleet slurm's scripts and node_check's pieces that need no cluster (the real one: tests/integration/test_fleet_slurm.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from aoti_guard.cli import main
from aoti_guard.fleet.slurm import SlurmPlan, render_batch, render_prolog, render_submit
from runtime_probe import node_check
from runtime_probe.errors import UsageError

PLAN = SlurmPlan(package="/shared/m.pt2", reports="/shared/reports", nodelist="gpu[01-04]", gpus=1, probe_args="--fast --timeout 60")


def test_batch_submit_and_prolog_are_valid_bash_with_the_plan_in_them(tmp_path: Path) -> None:
    batch, submit, prolog = render_batch(PLAN), render_submit(PLAN, "/shared/probe.sbatch"), render_prolog(PLAN)
    for name, text in (("batch", batch), ("submit", submit), ("prolog", prolog)):
        path = tmp_path / name
        path.write_text(text)
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, (name, proc.stderr)
    assert "#SBATCH --gres=gpu:1" in batch and "#SBATCH --no-requeue" in batch
    assert (
        "exec python3 -m runtime_probe.node_check /shared/m.pt2 --report-dir /shared/reports --deadline 3000 --probe-args '--fast --timeout 60'"
        in batch
    )
    assert "scontrol show hostnames 'gpu[01-04]'" in submit and "sbatch --parsable --hold --array=0-$((N - 1))" in submit
    assert 'scontrol update JobId="${JOB}_${i}" ReqNodeList="${NODES[$i]}"' in submit and 'scontrol release "$JOB"' in submit
    assert '--node "$(hostname -s)"' in prolog and "exit 1" in prolog


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (SlurmPlan(package="/m.pt2", reports="/r"), "--nodelist or --constraint"),
        (SlurmPlan(package="/m.pt2", reports="/r", nodelist="a;reboot"), "not a Slurm hostlist"),
        (SlurmPlan(package="/m.pt2", reports="/r", constraint="a|b"), "one node feature"),
        (SlurmPlan(package="m.pt2", reports="/r", nodelist="a"), "absolute path"),
        (SlurmPlan(package="/m.pt2", reports="/r", nodelist="a", time_limit="soon"), "not a Slurm time"),
    ],
)
def test_bad_plans_are_usage_errors(plan: SlurmPlan, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("|", r"\|")):
        plan.check()


def test_cli_writes_the_scripts_without_submitting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["fleet", "slurm", "/shared/m.pt2", "--reports", "/shared/r", "--constraint", "h100", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["probe.sbatch", "prolog.sh", "submit.sh"]
    assert "#SBATCH --constraint=h100" in (out / "probe.sbatch").read_text()
    assert "submit with: bash" in capsys.readouterr().err
    assert main(["fleet", "slurm", "/shared/m.pt2", "--reports", "/shared/r", "--nodelist", "a", "--wait"]) == 2


def test_node_check_names_files_safely_and_npd_lines_fit() -> None:
    assert node_check._file_name("../../etc/passwd") == "_.._etc_passwd.json"
    assert node_check._file_name("gpu-01.cluster") == "gpu-01.cluster.json"
    fail = {"phases": [{"findings": [{"severity": "error", "code": "env.arch_mismatch"}, {"severity": "error", "code": "load.error"}]}]}
    line = node_check._npd_line(1, "/m/model.pt2", fail)
    assert line == "aoti-guard: model.pt2 FAILS here: env.arch_mismatch +1 more"
    long = node_check._npd_line(2, "/m/model.pt2", {"reason": "x\n" * 200})
    assert len(long) <= node_check.NPD_LINE and "\n" not in long and long.startswith("aoti-guard: no verdict")
    assert node_check._npd_line(0, "m.pt2", {}) == "aoti-guard: m.pt2 passes on this node"
