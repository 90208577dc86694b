"""``python -m runtime_probe PKG --verify-only`` and ``runtime-probe inspect`` on a host without
torch: a subprocess where ``import torch`` raises. A signed real package passes (exit 0) with its
key, fails (exit 1) with another key, unsigned, or with one changed byte; no torch is needed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .conftest import Built, run_cli, run_probe

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment in which ``import torch`` raises ImportError."""
    folder = tmp_path_factory.mktemp("no-torch")
    (folder / "torch.py").write_text("raise ImportError('torch is not installed on this host (test)')\n")
    return {"PYTHONPATH": str(folder)}


@pytest.fixture(scope="module")
def signed(static_pkg: Built, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("verify")
    for name in ("release.key", "other.key"):
        assert run_cli("keygen", str(folder / name)).returncode == 0
    pkg = folder / "model.pt2"
    shutil.copy(static_pkg.path, pkg)
    assert run_cli("sign", str(pkg), "--key", str(folder / "release.key")).returncode == 0
    return pkg, folder / "release.key.pub", folder / "other.key.pub"


def _verify(pkg: Path, env: dict[str, str], tmp_path: Path, *args: str) -> tuple[int, dict[str, object], str]:
    report = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    proc = run_probe(str(pkg), "--verify-only", "--json", str(report), *args, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, json.loads(report.read_text()), proc.stdout + proc.stderr


def _errors(report: dict[str, object]) -> list[str]:
    return [f["code"] for p in report["phases"] for f in p["findings"] if f["severity"] == "error"]  # type: ignore[index,union-attr,attr-defined]


def test_torch_is_really_missing(no_torch: dict[str, str], static_pkg: Built, tmp_path: Path) -> None:
    """Without --verify-only the same host fails on torch: the test's environment does block it."""
    proc = run_probe(str(static_pkg.path), "--json", str(tmp_path / "r.json"), env=no_torch)
    assert proc.returncode != 0
    assert "env.torch_missing" in (tmp_path / "r.json").read_text()


def test_verify_only_without_torch(no_torch: dict[str, str], signed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    pkg, key, other = signed
    rc, report, text = _verify(pkg, no_torch, tmp_path, "--public-key", str(key))
    assert rc == 0, text
    status = {p["name"]: p["status"] for p in report["phases"]}  # type: ignore[index,union-attr]
    assert status["archive"] == "passed" and status["load"] == "skipped" and status["host"] == "skipped"
    assert report["extra"]["verify_only"] is True  # type: ignore[index]
    rc, report, _ = _verify(pkg, no_torch, tmp_path, "--public-key", str(other))
    assert rc == 1 and _errors(report) == ["archive.signature_invalid"]
    changed = tmp_path / "changed.pt2"
    with zipfile.ZipFile(pkg) as zin, zipfile.ZipFile(changed, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(".wrapper.so"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            zout.writestr(info, data)
    rc, report, _ = _verify(changed, no_torch, tmp_path, "--public-key", str(key))
    assert rc == 1 and _errors(report) == ["archive.hash_mismatch"]
    proc = run_probe(str(pkg), "--verify-only", "--iterations", "5", env=no_torch)
    assert proc.returncode == 2 and "--iterations needs the model loaded" in proc.stderr


def test_unsigned_with_a_key_fails(no_torch: dict[str, str], static_pkg: Built, signed: tuple[Path, Path, Path], tmp_path: Path) -> None:
    rc, report, _ = _verify(static_pkg.path, no_torch, tmp_path, "--public-key", str(signed[1]))
    assert rc == 1 and _errors(report) == ["archive.signature_missing"]


def test_inspect_without_torch(no_torch: dict[str, str], static_pkg: Built, tmp_path: Path) -> None:
    proc = run_probe("inspect", str(static_pkg.path), env=no_torch)  # runtime-probe inspect PKG
    assert proc.returncode == 0, proc.stderr
    assert "manifest schema" in proc.stdout and "inputs:" in proc.stdout and "golden" in proc.stdout
    out = tmp_path / "inspect.json"
    proc = run_probe("inspect", str(static_pkg.path), "--json", str(out), env=no_torch)
    assert proc.returncode == 0 and json.loads(out.read_text())["kind"] == "inspect"
    proc = subprocess.run(
        [sys.executable, "-m", "runtime_probe.inspect", str(static_pkg.path), "--json", "-"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **no_torch},
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["manifest"]["model_name"], proc.stderr
    assert "manifest schema" in proc.stderr  # the text beside JSON on stdout goes to stderr
    missing = run_probe("inspect", str(tmp_path / "missing.pt2"), env=no_torch)
    assert missing.returncode == 2 and "no such file" in missing.stderr
