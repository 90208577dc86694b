"""fleet slurm's scripts and node_check's pieces that need no cluster (the real one: tests/integration/test_fleet_slurm.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from aoti_guard.cli import main
from aoti_guard.fleet.slurm import SlurmPlan, render_batch, render_prolog, render_submit
from runtime_probe import node_check
from runtime_probe.reporting.errors import UsageError
from tests.hostile.script_stubs import argv_of, calls, payloads_ran, run_script, stub_bin

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
        "exec python3 -m runtime_probe.node_check /shared/m.pt2 --report-dir /shared/reports --deadline 3000 '--probe-args=--fast --timeout 60'"
        in batch
    )
    assert "scontrol show hostnames 'gpu[01-04]'" in submit and "sbatch --parsable --hold --array=0-$((N - 1))" in submit
    assert 'scontrol update JobId="${JOB}_${i}" ReqNodeList="${NODES[$i]}"' in submit and 'scontrol release "$JOB"' in submit
    assert '--node "$(hostname -s)"' in prolog and "exit 1" in prolog
    assert "--probe-args=--fast" in render_prolog(SlurmPlan(package="/m.pt2", reports="/r", nodelist="a"))  # one word: see below


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
    assert node_check.report_file_name("../../etc/passwd") == "etc_passwd.json"  # paths.plain_name
    assert node_check.report_file_name("gpu-01.cluster") == "gpu-01.cluster.json"
    fail = {"phases": [{"findings": [{"severity": "error", "code": "env.arch_mismatch"}, {"severity": "error", "code": "load.error"}]}]}
    line = node_check._npd_line(1, "/m/model.pt2", fail)
    assert line == "aoti-guard: model.pt2 FAILS here: env.arch_mismatch +1 more"
    long = node_check._npd_line(2, "/m/model.pt2", {"reason": "x\n" * 200})
    assert len(long) <= node_check.NPD_LINE and "\n" not in long and long.startswith("aoti-guard: no verdict")
    assert node_check._npd_line(0, "m.pt2", {}) == "aoti-guard: m.pt2 passes on this node"


# Issue 40: every value that reaches a script is refused with a control character (naming its flag),
# else quoted; every script runs under bash with stub commands and no payload runs.

HOSTILE_REFUSED = [
    ("PKG", ["/shared/m.pt2\ntouch PWNED\n#", "--reports", "/r"]),
    ("--reports", ["/m.pt2", "--reports", "/r\ntouch PWNED"]),
    ("--mem", ["/m.pt2", "--reports", "/r", "--mem", "8G\ntouch PWNED"]),
    ("--partition", ["/m.pt2", "--reports", "/r", "--partition", "p\ntouch PWNED"]),
    ("--python", ["/m.pt2", "--reports", "/r", "--python", "python3\rtouch PWNED"]),
    ("--probe-args", ["/m.pt2", "--reports", "/r", "--probe-args", "--fast\ntouch PWNED"]),
    ("--mem", ["/m.pt2", "--reports", "/r", "--mem", "8G --mem=1"]),  # no newline, but not a size either
    ("--partition", ["/m.pt2", "--reports", "/r", "--partition", "p #x"]),
]


@pytest.mark.parametrize(("flag", "args"), HOSTILE_REFUSED, ids=[f"{f}-{i}" for i, (f, _) in enumerate(HOSTILE_REFUSED)])
def test_a_value_no_quoting_makes_safe_is_a_usage_error_naming_its_flag(
    flag: str, args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["fleet", "slurm", *args, "--nodelist", "a", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err and "\ntouch" not in err
    assert not out.exists()  # nothing written: every script is rendered before the first is


def _render(tmp_path: Path, pkg: str, reports: str, *extra: str) -> Path:
    out = tmp_path / "out"
    assert main(["fleet", "slurm", pkg, "--reports", reports, "--nodelist", "node01,node02", "-o", str(out), *extra]) == 0
    for name in ("probe.sbatch", "submit.sh", "prolog.sh"):
        proc = subprocess.run(["bash", "-n", str(out / name)], capture_output=True, text=True)
        assert proc.returncode == 0, (name, proc.stderr)
    return out


@pytest.mark.parametrize(
    "folder", ["shared/$(touch PWNED)", 'r"; touch PWNED; echo "', "it's `touch PWNED` 100% #x"], ids=["subst", "dquote", "quote-pct"]
)
def test_every_script_runs_with_hostile_legal_values_and_no_payload_runs(tmp_path: Path, folder: str) -> None:
    pkg, reports = str(tmp_path / "m $(touch PWNED).pt2"), str(tmp_path / folder)
    out = _render(tmp_path, pkg, reports, "--mem", "16G", "--partition", "gpu,gpu-long")
    stubs = stub_bin(tmp_path / "stubs")
    run = tmp_path / "run"
    batch = run_script(out / "probe.sbatch", stubs, run)
    assert batch.returncode == 0, batch.stderr
    assert argv_of(stubs, "python")[:6] == ["-m", "runtime_probe.node_check", pkg, "--report-dir", reports, "--deadline"]
    submit = run_script(out / "submit.sh", stubs, run)
    assert submit.returncode == 0 and submit.stdout == "4242\n", submit.stderr
    sbatch = argv_of(stubs, "sbatch")
    assert f"--output={reports.replace('%', '%%')}/logs/%A_%a.out" in sbatch and sbatch[-1] == str(out / "probe.sbatch")
    assert (Path(reports) / "logs").is_dir()  # the folder itself, by its literal name
    prolog = run_script(out / "prolog.sh", stubs, run)
    assert prolog.returncode == 0, prolog.stderr
    argv = argv_of(stubs, "python")
    assert argv[2:5] == [pkg, "--report-dir", reports] and "--probe-args=--fast" in argv and argv[-2:] == ["--node", "node01"]
    assert payloads_ran(tmp_path) == []


@pytest.mark.parametrize(
    ("rc", "drains", "logged"), [(1, True, "fails on this node: draining"), (0, False, None), (2, False, "no verdict")]
)
def test_prolog_drains_the_node_only_on_a_failing_verdict(tmp_path: Path, rc: int, drains: bool, logged: str | None) -> None:
    out = _render(tmp_path, "/shared/m.pt2", str(tmp_path / "reports"))
    stubs = stub_bin(tmp_path / "stubs")
    proc = run_script(out / "prolog.sh", stubs, tmp_path / "run", STUB_PY_RC=str(rc))
    assert proc.returncode == (1 if drains else 0), proc.stderr
    log = (stubs / "log" / "logger").read_text() if logged else ""
    assert (logged or "") in log


def test_submit_cancels_the_held_array_when_pinning_a_task_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _render(tmp_path, "/shared/m.pt2", str(tmp_path / "reports"))
    stubs = stub_bin(tmp_path / "stubs")
    ok = run_script(out / "submit.sh", stubs, tmp_path / "run")
    assert ok.returncode == 0 and calls(stubs)[-1] == "scontrol release 4242" and not any("scancel" in c for c in calls(stubs))
    (stubs / "log" / "calls").unlink()
    bad = run_script(out / "submit.sh", stubs, tmp_path / "run", STUB_BAD_NODE="node02")
    assert bad.returncode != 0 and bad.stdout == ""
    made = calls(stubs)
    assert "scontrol update JobId=4242_0 ReqNodeList=node01" in made and made[-1] == "scancel 4242"
    assert not any(c.startswith("scontrol release") for c in made)  # never released unpinned
    assert "pinning task 1 of array 4242 to node node02 failed" in bad.stderr and "cancelled while held" in bad.stderr
    # through --submit: a tool error that says what became of the array
    monkeypatch.setenv("PATH", f"{stubs / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_LOG", str(stubs / "log"))
    monkeypatch.setenv("STUB_BAD_NODE", "node02")
    capsys.readouterr()
    code = main(
        ["fleet", "slurm", "/shared/m.pt2", "--reports", str(tmp_path / "r"), "--nodelist", "node01,node02", "-o", str(out), "--submit"]
    )
    err = capsys.readouterr().err
    assert code == 3 and "array 4242 cancelled while held: none of its tasks ran" in err, err


def test_submit_says_the_array_stays_held_when_it_cannot_be_cancelled(tmp_path: Path) -> None:
    out = _render(tmp_path, "/shared/m.pt2", str(tmp_path / "reports"))
    stubs = stub_bin(tmp_path / "stubs")
    (stubs / "bin" / "scancel").write_text('#!/bin/bash\necho "scancel $*" >> "$STUB_LOG/calls"\nexit 1\n')
    bad = run_script(out / "submit.sh", stubs, tmp_path / "run", STUB_BAD_NODE="node01")
    assert bad.returncode != 0 and "stays held" in bad.stderr and "scancel 4242" in bad.stderr
    assert not any(c.startswith("scontrol release") for c in calls(stubs))
