"""The debug twin's child process (builder/twin/schedule.py) does not outlive a build that stops early."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from aoti_guard import _proc
from aoti_guard.builder import pipeline
from aoti_guard.builder.compile import aoti as compile_mod
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.twin import schedule as twin_mod
from aoti_guard.spec import BuildSpec

pytestmark = pytest.mark.integration


def test_a_failed_release_compile_kills_the_twin_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[twin_mod.TwinChild] = []

    def start_child(
        ep: Any, configs: Any, folder: str, out_path: str, model_name: str, imports: Any = ()
    ) -> tuple[twin_mod.TwinChild, None]:
        # a stand-in for the twin's compile that would run for a minute
        running = _proc.start([sys.executable, "-c", "import time; time.sleep(60)"], log_path=str(tmp_path / "child.log"))
        started.append(twin_mod.TwinChild(running, str(tmp_path / "result.json"), out_path))
        return started[-1], None

    def failing_compile(ep: Any, configs: Any) -> list[Any]:
        assert started and started[0].running.proc.poll() is None  # the twin was compiling beside it
        raise compile_mod.CompileError(["CppCompileError: injected"], "a hint")

    monkeypatch.setattr(twin_mod, "start_child", start_child)
    monkeypatch.setattr(compile_mod, "compile_files", failing_compile)
    spec = BuildSpec(torch.nn.Linear(4, 2).eval(), (torch.randn(3, 4),), {}, None, "linear")
    report = pipeline.build(spec, BuildOptions(output=str(tmp_path / "linear.pt2")))

    assert report.exit_code == 1
    assert [f.code for p in report.phases for f in p.findings if f.severity.value == "error"] == ["build.compile_failed"]
    assert len(started) == 1
    assert started[0].running.proc.poll() is not None  # killed and reaped on the way out
