"""tests/tools/zygote.py: a forked child is the command line ``subprocess.run`` would have run
(argv, working directory, environment, stdout and stderr apart, exit status, a signal's death, a
timeout), imports the served module afresh, and the zygote steps aside where a fork could not be
that command line (an environment it read at import differs; a module it does not serve)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tools import zygote as zygote_module
from tests.tools.zygote import Zygote, differing_keys

TARGET = "tests.unit.zygote_target"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "imports.log"
    monkeypatch.setenv("ZYGOTE_TARGET_IMPORTS", str(log))
    return log


@pytest.fixture
def zygote(imports: Path) -> Iterator[Zygote]:
    made = Zygote(served=[TARGET], preload=["json"])  # torch's imports are what it saves, not what it is
    yield made
    made.close()


def test_a_forked_child_is_the_command_line_subprocess_would_run(zygote: Zygote, tmp_path: Path, imports: Path) -> None:
    env = {**os.environ, "AOTI_GUARD_MARKER": "seen"}
    args = ["exit", "3", "a b", "$(touch x)"]
    forked = zygote.run(TARGET, args, env=env, cwd=str(REPO))
    real = subprocess.run([sys.executable, "-m", TARGET, *args], capture_output=True, text=True, env=env, cwd=REPO)
    assert forked is not None
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert json.loads(forked.stdout) == {"argv": args, "cwd": str(REPO), "marker": "seen"}
    assert forked.returncode == 3 and forked.stderr == "to stderr\nsecond line\n"
    assert forked.args == [sys.executable, "-m", TARGET, *args]
    assert not (REPO / "x").exists()


def test_the_working_directory_decides_what_imports_as_in_a_real_interpreter(zygote: Zygote, tmp_path: Path) -> None:
    """From a folder outside the repository the ``tests`` package is not importable: the zygote
    imported it for itself, and the child must not find it there."""
    forked = zygote.run(TARGET, [], env=dict(os.environ), cwd=str(tmp_path))
    real = subprocess.run([sys.executable, "-m", TARGET], capture_output=True, text=True, cwd=tmp_path)
    assert forked is not None and forked.returncode == real.returncode == 1
    assert "No module named 'tests'" in forked.stderr and "No module named 'tests'" in real.stderr


def test_each_child_imports_the_served_module_afresh(zygote: Zygote, imports: Path) -> None:
    for _ in range(2):
        done = zygote.run(TARGET, [], env=dict(os.environ))
        assert done is not None and done.returncode == 0
    pids = imports.read_text().split()
    assert len(pids) == 2 and len(set(pids)) == 2 and str(zygote.pid) not in pids


def test_a_child_killed_by_a_signal_reads_as_subprocess_reports_it(zygote: Zygote) -> None:
    done = zygote.run(TARGET, ["kill", "SIGSEGV"], env=dict(os.environ))
    assert done is not None and done.returncode == -signal.SIGSEGV


def test_a_timeout_kills_the_child_and_raises_as_subprocess_does(zygote: Zygote) -> None:
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        zygote.run(TARGET, ["sleep", "60"], env=dict(os.environ), timeout=1.0)
    assert time.monotonic() - started < 20
    assert json.loads(str(info.value.output))["argv"] == ["sleep", "60"]  # what it wrote before


def test_it_steps_aside_where_a_fork_could_not_be_the_command_line(zygote: Zygote, monkeypatch: pytest.MonkeyPatch) -> None:
    base = dict(os.environ)
    assert zygote.run(TARGET, [], env={**base, "CXX": "clang++"}) is None  # read by Inductor at import
    assert zygote.run(TARGET, [], env={**base, "TMPDIR": "/elsewhere"}) is None
    assert zygote.run("aoti_guard", [], env=base) is None  # not served by this one
    monkeypatch.setenv("AOTI_GUARD_TEST_ZYGOTE", "0")
    assert zygote.run(TARGET, [], env=base) is None


def test_only_our_variables_and_the_test_name_may_differ() -> None:
    base = {"PATH": "/bin", "CXX": "g++"}
    assert differing_keys(base, {**base, "AOTI_GUARD_X": "1", "PYTEST_CURRENT_TEST": "t"}) == []
    assert differing_keys(base, {"PATH": "/bin"}) == ["CXX"]
    assert differing_keys(base, {**base, "PYTHONHASHSEED": "0", "TORCH_LOGS": "+dynamo"}) == ["PYTHONHASHSEED", "TORCH_LOGS"]


def test_the_product_is_never_preloaded() -> None:
    """A module the product forgot to import must still fail in a forked build."""
    assert not [m for m in zygote_module.PRELOAD if m.split(".")[0] in ("aoti_guard", "runtime_probe", "tests")]


def test_the_zygote_ends_with_its_worker() -> None:
    script = (
        "import os; from tests.tools.zygote import Zygote; z = Zygote(served=[], preload=[]);"
        "assert z.start(); print(z.pid, flush=True); os._exit(0)"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    pid = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # reaped by init once gone; a zombie of ours would still answer
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return
        except FileNotFoundError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the zygote outlived the process that started it")
