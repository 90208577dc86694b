"""bench/lane_census.py: the process kinds, the lane's CPU and the floor under it, and the hook that
every process of a census run loads (docs/benchmarks.md, "The floor under a lane")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import lane_census
from bench.census_hook import WATCHED
from bench.lane_census import ROOT, census, floor_minutes, kind


def _write(folder: Path, name: str, rows: list[dict[str, object]]) -> None:
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-c"], "python -c"),
        ([str(ROOT / "aoti_guard" / "__main__.py"), "build", "-o", "x.pt2"], "aoti-guard build"),
        ([str(ROOT / "aoti_guard" / "__main__.py"), "--help"], "python -m aoti_guard"),
        ([str(ROOT / "runtime_probe" / "__main__.py"), "pkg.pt2"], "python -m runtime_probe"),
        ([str(ROOT / "runtime_probe" / "child" / "main.py"), "3"], "runtime_probe/child/main.py"),
        (["/somewhere/venv/lib/python3.11/site-packages/pytest/__main__.py", "-n"], "python -m pytest"),
        ([str(ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "pip" / "__main__.py")], "python -m pip"),
        ([str(ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "pip" / "_vendor" / "hooks.py")], "pip/_vendor/hooks.py"),
        (["/elsewhere/tool.py"], "tool.py"),
        ([], "(no argv)"),
    ],
)
def test_a_process_is_named_by_its_script_and_subcommand(argv: list[str], expected: str) -> None:
    assert kind(argv) == expected


def test_the_lane_cpu_and_the_floor_under_it(tmp_path: Path) -> None:
    build = str(ROOT / "aoti_guard" / "__main__.py")
    # two workers (pids 11, 12) under the pytest controller (10); a build (20) of worker 11 that
    # imported torch and Inductor; a probe child (30) that imported torch more cheaply than alone
    _write(
        tmp_path,
        "tests.jsonl",
        [
            {"test": "t::a", "wall": 10.0, "self": 0.5, "children": 8.0},
            {"test": "t::b", "wall": 4.0, "self": 0.25, "children": 2.0},
        ],
    )
    _write(
        tmp_path,
        "procs.jsonl",
        [
            {"pid": 10, "ppid": 1, "argv": ["pytest/__main__.py"], "cpu": 1.0, "startup": 0.0, "imports": {}},
            {"pid": 11, "ppid": 10, "argv": ["-c"], "cpu": 3.0, "startup": 0.0, "imports": {"torch": 1.0}},
            {"pid": 12, "ppid": 10, "argv": ["-c"], "cpu": 2.0, "startup": 0.0, "imports": {"torch": 1.0}},
            {"pid": 20, "ppid": 11, "argv": [build, "build"], "cpu": 5.0, "startup": 0.25, "imports": {"torch": 1.25, "sympy": 0.25}},
            {"pid": 30, "ppid": 12, "argv": ["-c"], "cpu": 1.25, "startup": 0.0, "imports": {"torch": 1.0}},
            # a process that used less CPU than the standalone cost of its imports is charged its CPU
            {"pid": 31, "ppid": 12, "argv": ["-c"], "cpu": 0.5, "startup": 0.0, "imports": {"torch": 0.5}},
        ],
    )
    (tmp_path / "standalone.json").write_text(json.dumps({"torch": 1.5, "sympy": 0.5}))  # what `run` measures first
    (tmp_path / "lane.json").write_text(json.dumps({"returncode": 0, "wall": 8.0, "cpu": 16.0, "cores": 2}))  # and after
    c = census(tmp_path)
    assert c.lane_cpu == 16.0  # the test command's, not the tests' sum (10.75)
    assert c.python_cpu == 12.75
    assert c.kinds["aoti-guard build"].processes == 1
    assert c.kinds["aoti-guard build"].startup_and_imports == 1.75
    assert c.kinds["aoti-guard build"].upper == 2.25  # 0.25 + max(1.25, 1.5) + max(0.25, 0.5)
    assert c.kinds["python -c"].processes == 4
    assert c.kinds["python -c"].upper == 1.5 + 1.5 + 1.25 + 0.5
    assert c.upper == 2.25 + 4.75
    assert c.measured == 1.75 + 3.5
    assert c.imports == {"torch": 4.75, "sympy": 0.25}
    assert floor_minutes(c.lane_cpu - c.upper, cores=2) == pytest.approx(9.0 / 120)
    assert floor_minutes(120.0, cores=2, utilisation=0.5) == 2.0
    text = lane_census.report(tmp_path, cores=2, wall=8.0)
    assert "the floor (the lane's CPU less that upper estimate): 9 CPU-s" in text
    assert "(100% of 2 cores)" in text


def test_a_folder_without_the_commands_cpu_counts_each_tests_worker_and_what_it_reaped(tmp_path: Path) -> None:
    _write(tmp_path, "tests.jsonl", [{"test": "t::a", "wall": 1.0, "self": 0.5, "children": 2.0}])
    _write(tmp_path, "procs.jsonl", [])
    assert census(tmp_path, standalone={}).lane_cpu == 2.5


def test_the_hook_records_a_process_once_with_its_imports_even_through_os_exit(tmp_path: Path) -> None:
    hook = ROOT / "bench" / "census_hook.py"
    # run twice, as a .pth seen through both lib and lib64 would; then leave by os._exit, as the CLI does
    code = f"import runpy; runpy.run_path({str(hook)!r}); runpy.run_path({str(hook)!r}); import colorsys; import os; os._exit(3)"
    env = {**os.environ, "AOTI_GUARD_CENSUS_DIR": str(tmp_path)}
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 3
    (record,) = (json.loads(line) for line in (tmp_path / "procs.jsonl").read_text().splitlines())
    assert record["argv"] == ["-c"] and record["startup"] > 0 and record["cpu"] > 0
    assert "other:colorsys" in record["imports"] and not any(name in WATCHED for name in record["imports"])
    watched = f"import runpy; runpy.run_path({str(hook)!r}); import sympy"
    assert subprocess.run([sys.executable, "-c", watched], env=env, check=False).returncode == 0
    second = json.loads((tmp_path / "procs.jsonl").read_text().splitlines()[1])
    assert second["imports"]["sympy"] > 0 and "other:sympy" not in second["imports"]  # its submodules inside it


def test_without_the_variable_the_hook_does_nothing(tmp_path: Path) -> None:
    hook = ROOT / "bench" / "census_hook.py"
    env = {k: v for k, v in os.environ.items() if k != "AOTI_GUARD_CENSUS_DIR"}
    code = f"import runpy, sys; runpy.run_path({str(hook)!r}); print(getattr(sys, '_aoti_guard_census', False))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"
    assert list(tmp_path.iterdir()) == []


def test_importing_the_hook_for_its_names_installs_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "AOTI_GUARD_CENSUS_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    code = "import sys, bench.census_hook; print(getattr(sys, '_aoti_guard_census', False))"
    # -S: no site-packages .pth runs (a census run's own would install the hook before the import)
    out = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False" and not (tmp_path / "procs.jsonl").exists()
