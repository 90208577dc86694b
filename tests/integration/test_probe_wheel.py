"""The runtime-probe wheel: built alone (packaging/runtime-probe), installed into a fresh venv
with no torch, it brings no dependency, and its CLI, schemas and archive checks run there."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ..unit.fakepkg import make_package


def _load_build() -> Any:
    """scripts/build_probe_wheel.py's ``build``, loaded by path: putting scripts/ on sys.path made
    its docker/ folder importable as a namespace package named ``docker``, which then passed for
    the Docker SDK where the SDK was not installed (the 2.15 lane's container unit tests)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "build_probe_wheel.py"
    spec = importlib.util.spec_from_file_location("build_probe_wheel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


build = _load_build()

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


def _stub_wheel(out: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()) -> Path:
    """A minimal pure-Python wheel (PEP 427) made by hand: no build tool, no index."""
    import base64
    import hashlib

    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    meta = "".join(["Metadata-Version: 2.1\n", f"Name: {name}\n", f"Version: {version}\n", *(f"Requires-Dist: {r}\n" for r in requires)])
    entries = {
        **files,
        f"{dist}/METADATA": meta,
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    wheel = out / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in entries.items():
            zf.writestr(path, text)
        zf.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return wheel


def test_installing_the_probe_wheel_leaves_another_torch_as_it_is(tmp_path: Path) -> None:
    """Issue 15: a serving venv that holds a torch outside aoti-guard's pin (>=2.11,<2.14; a
    stand-in torch 2.5.0, since nothing can be downloaded) gets runtime-probe by a plain
    ``pip install`` with dependency resolution on: torch stays 2.5.0 and the probe runs. The control:
    a wheel that pins torch as the whole distribution does cannot be installed there without
    fetching another torch."""
    wheel = build(tmp_path / "dist")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    torch_whl = _stub_wheel(stubs, "torch", "2.5.0", {"torch/__init__.py": '__version__ = "2.5.0"\n'})
    pinned = _stub_wheel(stubs, "pins-torch", "1.0", {"pins_torch/__init__.py": ""}, ("torch>=2.11,<2.14",))

    venv = tmp_path / "venv"
    assert _run(sys.executable, "-m", "venv", venv).returncode == 0
    py = venv / "bin" / "python"
    assert _run(py, "-m", "pip", "install", "--no-index", torch_whl).returncode == 0

    def torch_version() -> str:
        return _run(py, "-c", "import torch; print(torch.__version__)").stdout.strip()

    assert torch_version() == "2.5.0"
    install = _run(py, "-m", "pip", "install", "--no-index", "--find-links", stubs, wheel)  # resolution on, no --no-deps
    assert install.returncode == 0, install.stderr
    assert torch_version() == "2.5.0"
    versions = {p["name"]: p["version"] for p in json.loads(_run(py, "-m", "pip", "list", "--format=json").stdout)}
    assert versions["torch"] == "2.5.0" and "runtime-probe" in versions
    assert _run(py, "-m", "pip", "check").returncode == 0

    damaged = make_package(tmp_path / "damaged.pt2", extra=[("data/aotinductor/model/added.so", b"later")])
    proc = _run(venv / "bin" / "runtime-probe", damaged, "--json", "-", "-q", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "archive.hash_mismatch" in {f["code"] for p in json.loads(proc.stdout)["phases"] for f in p["findings"]}

    control = _run(py, "-m", "pip", "install", "--no-index", "--find-links", stubs, pinned)
    assert control.returncode != 0 and "torch" in control.stderr  # it would have to move torch
    assert torch_version() == "2.5.0"
