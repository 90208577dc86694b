"""Signed packages end to end: keygen, build --sign-key, sign, probe --public-key, guarded load."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.reporting.errors import PackageRejected
from runtime_probe.runtime import layout

from .conftest import MODELS, Built, build_package, run_cli, run_probe

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("keys")
    for name in ("release.key", "other.key"):
        proc = run_cli("keygen", str(folder / name))
        assert proc.returncode == 0, proc.stderr
    return folder / "release.key", folder / "other.key"


@pytest.fixture(scope="module")
def signed_build(keys: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Built:
    built = build_package(tmp_path_factory.mktemp("signed"), "signed", f"{MODELS}:static", "--no-debug-twin", "--sign-key", str(keys[0]))
    assert built.returncode == 0, built.stdout + built.stderr
    return built


def probe_report(
    pkg: Path, tmp_path: Path, *args: str, cli: str = "runtime_probe", env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    report = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    if cli == "runtime_probe":
        proc = run_probe(str(pkg), "--json", str(report), *args, env=env)
    else:
        proc = run_cli("probe", str(pkg), "--json", str(report), *args, env=env)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    return proc.returncode, json.loads(report.read_text())


def codes(report: dict[str, Any]) -> list[str]:
    return [f["code"] for p in report["phases"] for f in p["findings"] if f["severity"] == "error"]


def status(report: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["status"] for p in report["phases"]}


def test_build_signs_and_the_probe_requires_the_key(signed_build: Built, keys: tuple[Path, Path], tmp_path: Path) -> None:
    assert signed_build.report is not None
    key_id = signed_build.report["extra"]["signature"]["key_id"]
    with zipfile.ZipFile(signed_build.path) as zf:
        assert zf.namelist()[-1].endswith(layout.SIGNATURE)
    rc, report = probe_report(signed_build.path, tmp_path, "--public-key", f"{keys[0]}.pub")
    assert rc == 0 and set(status(report).values()) == {"passed", "skipped"} and status(report)["escalate"] == "skipped"
    archive = report["phases"][0]["detail"]
    assert archive["signature"] == {**archive["signature"], "verified": True, "key_id": key_id, "backend": "cryptography"}
    rc, report = probe_report(signed_build.path, tmp_path, "--public-key", f"{keys[1]}.pub", cli="aoti-guard")
    assert rc == 1 and codes(report) == ["archive.signature_invalid"]
    assert status(report)["host"] == "skipped"  # nothing was started, nothing native opened


def test_pure_python_verifier_end_to_end(signed_build: Built, keys: tuple[Path, Path], tmp_path: Path) -> None:
    env = {"RUNTIME_PROBE_ED25519": "pure"}
    rc, report = probe_report(signed_build.path, tmp_path, "--public-key", f"{keys[0]}.pub", "--fast", env=env)
    assert rc == 0 and report["phases"][0]["detail"]["signature"]["backend"] == "pure-python"


def test_unsigned_package_and_changed_entries(static_pkg: Built, signed_build: Built, keys: tuple[Path, Path], tmp_path: Path) -> None:
    rc, report = probe_report(static_pkg.path, tmp_path, "--public-key", f"{keys[0]}.pub")
    assert rc == 1 and codes(report) == ["archive.signature_missing"] and status(report)["load"] == "skipped"
    changed = tmp_path / "changed.pt2"
    with zipfile.ZipFile(signed_build.path) as zin, zipfile.ZipFile(changed, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(".wrapper.so"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            zout.writestr(info, data)
    rc, report = probe_report(changed, tmp_path, "--public-key", f"{keys[0]}.pub")
    assert rc == 1 and codes(report) == ["archive.hash_mismatch"] and status(report)["load"] == "skipped"


def test_signing_an_existing_package_then_resigning(static_pkg: Built, keys: tuple[Path, Path], tmp_path: Path) -> None:
    pkg = tmp_path / "model.pt2"
    shutil.copy(static_pkg.path, pkg)
    assert run_cli("sign", str(pkg), "--key", str(keys[0])).returncode == 0
    proc = run_cli("sign", str(pkg), "--key", str(keys[1]))
    assert proc.returncode == 0 and "replaced a signature" in proc.stdout
    rc, report = probe_report(pkg, tmp_path, "--public-key", f"{keys[1]}.pub")  # the rewritten zip loads and runs
    assert rc == 0, report
    rc, report = probe_report(pkg, tmp_path, "--public-key", f"{keys[0]}.pub")
    assert rc == 1 and codes(report) == ["archive.signature_invalid"]
    with zipfile.ZipFile(static_pkg.path) as a, zipfile.ZipFile(pkg) as b:
        original = {i.filename: a.read(i) for i in a.infolist()}
        resigned = {i.filename: b.read(i) for i in b.infolist() if not i.filename.endswith(layout.SIGNATURE)}
    assert resigned == original
    code = f"import torch; m = torch._inductor.aoti_load_package({str(pkg)!r}); print(m(torch.randn(8, 16)).shape)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "torch.Size([8, 16])" in proc.stdout, proc.stderr[-2000:]


def test_guarded_loader_takes_the_same_key(signed_build: Built, keys: tuple[Path, Path], static_pkg: Built) -> None:
    import torch

    from runtime_probe import load

    model = load(signed_build.path, public_key=f"{keys[0]}.pub")
    assert model(torch.randn(8, 16)).shape == (8, 16)
    with pytest.raises(PackageRejected) as info:
        load(signed_build.path, public_key=f"{keys[1]}.pub")
    assert [f.code for f in info.value.findings] == ["archive.signature_invalid"]
    with pytest.raises(PackageRejected) as info:
        load(static_pkg.path, public_key=f"{keys[0]}.pub")
    assert "archive.signature_missing" in [f.code for f in info.value.findings]


@pytest.mark.parametrize("which", ["missing", "public"])
def test_build_with_an_unusable_key_fails_before_compiling(which: str, keys: tuple[Path, Path], tmp_path: Path) -> None:
    key = tmp_path / "nope.key" if which == "missing" else Path(f"{keys[0]}.pub")
    started = time.monotonic()
    proc = run_cli("build", f"{MODELS}:static", "-o", str(tmp_path / "m.pt2"), "--sign-key", str(key))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("no key file" if which == "missing" else "is a public key") in proc.stderr
    assert time.monotonic() - started < 60 and not (tmp_path / "m.pt2").exists()


def test_build_that_cannot_sign_writes_nothing(keys: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aoti_guard.builder import pipeline as builder
    from runtime_probe.reporting.errors import ToolError

    def refuse(manifest: bytes, key: object) -> None:
        raise ToolError("the signing service is down (simulated)")

    monkeypatch.setattr("aoti_guard.builder.package.assemble.sign_manifest", refuse)  # the build signs the manifest bytes there
    out = tmp_path / "m.pt2"
    report = builder.build(f"{MODELS}:static", builder.BuildOptions(output=str(out), debug_twin=False, sign_key=str(keys[0])))
    assert not report.passed and report.exit_code == 1
    package = report.phase("package")
    assert package is not None and [f.code for f in package.findings] == ["build.sign_failed"]
    assert not out.exists() and not list(tmp_path.glob("*.pt2"))
    assert os.listdir(tmp_path) == []
