"""Issue 16 (2): the bytes verified are the bytes loaded. The package is swapped for other bytes
right after the archive phase verified it (an in-process hook); the probe and runtime_probe.load
must still load, and report, the verified bytes."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest

import runtime_probe
from runtime_probe.probe import run as probe_run
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.trust import check as trust_check

from .conftest import Built

pytestmark = pytest.mark.integration


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_probe_loads_and_reports_the_bytes_it_verified(static_pkg: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "model.pt2"
    shutil.copy(static_pkg.path, pkg)
    verified = _sha(pkg)
    real = probe_run.archive_phase

    def archive_then_swap(shared: Any) -> Any:
        result = real(shared)
        pkg.write_bytes(b"not the package that was verified")  # an attacker's swap, between phases
        return result

    monkeypatch.setattr(probe_run, "archive_phase", archive_then_swap)
    report = probe_run.probe(pkg, ProbeOptions(fast=True, escalate=False))
    assert report.exit_code == 0, [(f.code, f.message) for p in report.phases for f in p.findings]
    assert report.package["sha256"] == verified != _sha(pkg)  # the report names the bytes it checked and ran
    archive = next(p for p in report.phases if p.name == "archive")
    assert archive.detail["hashes_checked"] > 0
    assert next(p for p in report.phases if p.name == "golden").status == "passed"


def test_load_returns_the_model_it_verified(static_pkg: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    pkg = tmp_path / "model.pt2"
    shutil.copy(static_pkg.path, pkg)
    real = trust_check.check_archive

    def check_then_swap(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        pkg.write_bytes(b"not the package that was verified")
        return result

    monkeypatch.setattr(trust_check, "check_archive", check_then_swap)
    model = runtime_probe.load(pkg)
    x = torch.randn(8, 16)
    expected = runtime_probe.load(static_pkg.path)(x)
    assert torch.equal(model(x), expected)
    assert pkg.read_bytes() == b"not the package that was verified"  # the swap did happen
