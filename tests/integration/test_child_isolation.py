"""Issue 25, defect 3: the children the tools start never import from the caller's working
directory, and a torch that cannot be imported there is an environment finding, never load.crash.

The command lines are run as their console scripts run them (``python -P``: the working directory
is not on the parent's own path either); the children are what these tests are about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.faults import inject_env

from .conftest import MODELS, Built

pytestmark = pytest.mark.integration

SHADOWS = {
    "torch.py": "raise SystemExit(99)\n",
    "runtime_probe.py": "print('a runtime_probe.py from the working directory ran')\nraise SystemExit(98)\n",
    "aoti_guard.py": "raise SystemExit(97)\n",
}


def _hostile_cwd(folder: Path) -> Path:
    folder.mkdir()
    for name, text in SHADOWS.items():
        (folder / name).write_text(text)
    return folder


def _run(module: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", module, *args], capture_output=True, text=True, timeout=900, cwd=cwd, env={**os.environ, **(env or {})}
    )


def _codes(report: dict[str, Any]) -> list[str]:
    return [f["code"] for p in report["phases"] for f in p["findings"] if f["severity"] == "error"]


def test_build_and_probe_ignore_modules_in_the_working_directory(tmp_path: Path) -> None:
    """The build's validation child, the twin's compile child and the probe's child all start in
    a folder holding a torch.py, a runtime_probe.py and an aoti_guard.py that exit at import."""
    cwd = _hostile_cwd(tmp_path / "work")
    built = _run("aoti_guard", "build", f"{MODELS}:static", "-o", "m.pt2", "--json", "build.json", cwd=cwd)
    assert built.returncode == 0, built.stderr[-3000:]
    report = json.loads((cwd / "build.json").read_text())
    twin = next(p for p in report["phases"] if p["name"] == "debug_twin")
    assert report["extra"]["manifest_summary"]["debug_twin"] is True
    assert twin["detail"]["where"] == "a child process, beside the release compile", twin["detail"]
    probed = _run("aoti_guard", "probe", "m.pt2", "--json", "probe.json", cwd=cwd)
    assert probed.returncode == 0, probed.stdout[-3000:]
    assert "working directory ran" not in probed.stdout + probed.stderr + built.stdout + built.stderr


def test_relative_pythonpath_entries_do_not_reach_the_child(static_pkg: Built, tmp_path: Path) -> None:
    """PYTHONPATH=shadow (relative) and an empty entry resolve against the working directory; the
    probe's parent imports no torch, so only its child would meet shadow/torch.py."""
    cwd = tmp_path / "work"
    (cwd / "shadow").mkdir(parents=True)
    (cwd / "shadow" / "torch.py").write_text("raise SystemExit(96)\n")
    proc = _run(
        "runtime_probe", str(static_pkg.path), "--fast", "--json", "r.json", cwd=cwd, env={"PYTHONPATH": os.pathsep.join(["shadow", ""])}
    )
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.parametrize(
    "torch_init,code",
    [("raise SystemExit(99)\n", "env.torch_missing"), ("import ctypes\nctypes.string_at(0)\n", "env.torch_broken")],
    ids=["exits", "segfaults"],
)
def test_a_torch_the_child_cannot_import_is_an_environment_finding(static_pkg: Built, tmp_path: Path, torch_init: str, code: str) -> None:
    broken = tmp_path / "broken"
    (broken / "torch").mkdir(parents=True)
    (broken / "torch" / "__init__.py").write_text(torch_init)
    proc = _run("runtime_probe", str(static_pkg.path), "--json", "r.json", cwd=tmp_path, env={"PYTHONPATH": str(broken)})
    report = json.loads((tmp_path / "r.json").read_text())
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert _codes(report) == [code]
    host = next(p for p in report["phases"] if p["name"] == "host")
    assert host["status"] == "failed" and host["findings"][0]["phase"] == "host"
    assert {p["name"]: p["status"] for p in report["phases"]}["load"] == "skipped"


BREAK_TORCH_IN_WORKERS = """
import os, sys
if os.environ.get("RUNTIME_PROBE_PARENT_PID"):  # set for child.Worker's children only
    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is broken in this interpreter (injected)")
            return None
    sys.meta_path.insert(0, _NoTorch())
"""


def test_the_builds_validation_child_without_torch_is_an_environment_finding(tmp_path: Path) -> None:
    inject = inject_env(tmp_path, None)
    (Path(inject["PYTHONPATH"].split(os.pathsep)[0]) / "sitecustomize.py").write_text(BREAK_TORCH_IN_WORKERS)
    proc = _run(
        "aoti_guard",
        "build",
        f"{MODELS}:static",
        "-o",
        str(tmp_path / "m.pt2"),
        "--no-debug-twin",
        "--json",
        "b.json",
        cwd=tmp_path,
        env={"PYTHONPATH": inject["PYTHONPATH"]},
    )
    report = json.loads((tmp_path / "b.json").read_text())
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert _codes(report) == ["env.torch_missing"]
    finding = next(f for p in report["phases"] for f in p["findings"] if f["code"] == "env.torch_missing")
    assert "injected" in finding["found"] and finding["phase"] == "validate"
