"""A model with a ``torch.library.custom_op`` builds, its twin compiles in a child, and a probe
needs ``--import`` to load it (issue 43)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import runtime_probe
from runtime_probe.reporting.errors import ToolError
from tests.integration.conftest import HERE, build_package, run_probe

pytestmark = pytest.mark.integration

TARGET = str(HERE / "user_op_models.py")


def test_a_custom_op_model_builds_and_probes_with_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = build_package(tmp_path, "user_op", f"{TARGET}:with_user_op")
    assert built.returncode == 0, built.stdout + built.stderr
    assert built.report is not None
    codes = [f["code"] for p in built.report["phases"] for f in p["findings"]]
    assert "build.twin_compiled_after" not in codes  # the twin's child registered the op too
    twin = next(p for p in built.report["phases"] if p["name"] == "debug_twin")
    assert twin["detail"]["where"].startswith("a child process")
    assert built.report["extra"]["user_modules"] == {"imported": [TARGET], "for": ["aoti_guard_tests::scaled_tanh"]}

    bare = run_probe(str(built.path), "--json", str(tmp_path / "bare.json"))
    assert bare.returncode == 1
    report = json.loads((tmp_path / "bare.json").read_text())
    load = next(p for p in report["phases"] if p["name"] == "load")
    assert [f["code"] for f in load["findings"]] == ["load.missing_op"]
    assert "aoti_guard_tests::scaled_tanh" in load["findings"][0]["message"]
    assert "--import" in load["findings"][0]["hint"]

    imported = run_probe(str(built.path), "--import", TARGET)
    assert imported.returncode == 0, imported.stdout + imported.stderr

    # the guarded loader in a process without the op refuses it by name, and leaves no copy of the
    # package in TMPDIR: torch's loader extracts it before the constructor that throws, and never
    # removes a refused one (7 such copies were left in /tmp by one CI run's public-record cases)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    with pytest.raises(ToolError) as info:
        runtime_probe.load(built.path)
    assert info.value.code == "load.missing_op", info.value
    assert sorted(p.name for p in tmpdir.iterdir()) == []
