"""Both distributions build with the standard tools from their own pyproject (``pip wheel`` and
``python -m build``, sdist then wheel), hold their code, and import from what was installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, cwd=cwd, env={**base, **(env or {})})


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the files the two pyprojects build from (in-tree builds write build/ folders)."""
    out = tmp_path_factory.mktemp("checkout")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("aoti_guard", "runtime_probe", "packaging"):
        shutil.copytree(ROOT / name, out / name, symlinks=True, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, out / name)
    return out


def _code_in(names: list[str], package: str) -> bool:
    return f"{package}/__init__.py" in names and f"{package}/cli.py" in names and any(n.endswith(".schema.json") for n in names)


def test_pip_wheel_builds_both_with_their_code(checkout: Path, tmp_path: Path) -> None:
    for folder, packages in ((checkout / "packaging" / "runtime-probe", ("runtime_probe",)), (checkout, ("aoti_guard", "runtime_probe"))):
        out = tmp_path / folder.name
        proc = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", out, folder)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (
            "License classifiers are deprecated" not in proc.stderr and "project.license` as a TOML table is deprecated" not in proc.stderr
        )
        (wheel,) = out.glob("*.whl")
        names = zipfile.ZipFile(wheel).namelist()
        for package in packages:
            assert _code_in(names, package), (wheel.name, names[:20])
        if packages == ("runtime_probe",):
            assert not any(n.startswith("aoti_guard/") for n in names)
        target = tmp_path / f"site-{folder.name}"
        install = _run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", target, wheel)
        assert install.returncode == 0, install.stderr[-2000:]
        code = "import sys, " + ", ".join(packages) + "; print(*[m.__file__ for m in (" + ", ".join(packages) + ",)])"
        imported = _run(sys.executable, "-c", code, cwd=tmp_path, env={"PYTHONPATH": str(target)})  # before the editable install
        assert imported.returncode == 0 and all(str(target) in f for f in imported.stdout.split()), imported.stdout + imported.stderr


def test_python_m_build_makes_sdist_and_wheel_of_the_probe(checkout: Path, tmp_path: Path) -> None:
    pytest.importorskip("build")  # in the test extra (constraints.txt pins it)
    proc = _run(sys.executable, "-m", "build", "--no-isolation", "-o", tmp_path, checkout / "packaging" / "runtime-probe")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,) = tmp_path.glob("runtime_probe-*.tar.gz")
    members = [m.name.split("/", 1)[1] for m in tarfile.open(sdist).getmembers() if "/" in m.name]
    assert "runtime_probe/cli.py" in members and "runtime_probe/schemas/probe-report.schema.json" in members
    (wheel,) = tmp_path.glob("runtime_probe-*.whl")  # built from the sdist: the code came through it
    assert _code_in(zipfile.ZipFile(wheel).namelist(), "runtime_probe")


def test_installing_aoti_guard_never_moves_the_installed_torch(checkout: Path, tmp_path: Path) -> None:
    """Issue 27: aoti-guard goes into someone else's environment, whose torch (2.11 to 2.15) it
    must keep. pip resolves aoti-guard WITH its dependencies into this very environment (its torch:
    2.13 in the main CI lane, 2.15 in the next; scripts/lane.sh also installs for real there and
    checks the version after) and reports what it would install: never torch, nor a package whose
    requirement would pull another torch."""
    import json

    import torch

    report = tmp_path / "report.json"
    proc = _run(
        sys.executable, "-m", "pip", "install", "--dry-run", "--no-build-isolation", "--disable-pip-version-check",
        "--report", report, checkout,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    would = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in json.loads(report.read_text())["install"]}
    assert "aoti-guard" in would, would  # the report is about what was asked
    moved = {name: version for name, version in would.items() if name == "torch" or name.startswith("nvidia-")}
    assert not moved, f"installing aoti-guard would move torch {torch.__version__}: {moved}"
