"""The runtime-probe wheel: built alone (packaging/runtime-probe), installed into a fresh venv
with no torch, it brings no dependency, and its CLI, schemas and archive checks run there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from build_probe_wheel import build

from ..unit.fakepkg import make_package

pytestmark = pytest.mark.integration


def _run(*argv: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, env=env, **kw)  # type: ignore[call-overload]


def test_the_probe_wheel_installs_alone_and_runs_without_torch(tmp_path: Path) -> None:
    wheel = build(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert all(n.startswith(("runtime_probe/", "runtime_probe-")) for n in names)  # no aoti_guard
    assert "runtime_probe/schemas/probe-report.schema.json" in names
    assert "Requires-Dist" not in metadata  # zero dependencies: torch is never pulled or moved

    venv = tmp_path / "venv"
    assert _run(sys.executable, "-m", "venv", venv).returncode == 0
    py, bindir = venv / "bin" / "python", venv / "bin"
    before = _run(py, "-m", "pip", "list", "--format=json").stdout
    install = _run(py, "-m", "pip", "install", "--no-deps", "--no-index", wheel)
    assert install.returncode == 0, install.stderr
    added = {p["name"] for p in json.loads(_run(py, "-m", "pip", "list", "--format=json").stdout)} - {p["name"] for p in json.loads(before)}
    assert added == {"runtime-probe"}
    assert _run(py, "-c", "import torch").returncode != 0  # the venv has no torch, and got none

    assert _run(bindir / "runtime-probe", "--help").returncode == 0
    assert "--strict" in _run(py, "-m", "runtime_probe", "--help").stdout
    damaged = make_package(tmp_path / "damaged.pt2", extra=[("data/aotinductor/model/added.so", b"later")])
    proc = _run(py, "-m", "runtime_probe", damaged, "--json", "-", "-q", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert "archive.hash_mismatch" in {f["code"] for p in report["phases"] for f in p["findings"]}
    schema = _run(py, "-c", "from runtime_probe import schemas; print(schemas.load('probe-report')['title'])")
    assert schema.stdout.strip() == "aoti-guard probe report"
