"""``aoti-guard build`` takes the factory's device (issue 43): a factory that mixes devices is a
usage error naming the tensors, before anything compiles; the report's device is the compiled one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import Built, run_cli

pytestmark = pytest.mark.integration

MIXED = """
import torch

class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x * self.w

def make():
    return Scale(), (torch.randn(2, 4, device="meta"),)
"""


def test_a_factory_mixing_devices_is_refused_before_compiling(tmp_path: Path) -> None:
    (tmp_path / "mixed.py").write_text(MIXED)
    proc = run_cli("build", f"{tmp_path / 'mixed.py'}:make", "-o", str(tmp_path / "m.pt2"), timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "the model is on cpu but inputs are elsewhere" in proc.stderr and "meta: args[0]" in proc.stderr  # named, before compiling
    assert "Traceback" not in proc.stderr and not (tmp_path / "m.pt2").exists()


def test_the_report_names_the_device_and_where_it_came_from(example_pkg: Built) -> None:
    report = example_pkg.report
    assert report is not None
    resolve = next(p for p in report["phases"] if p["name"] == "resolve")
    assert resolve["detail"]["device"] == "cpu" and resolve["detail"]["device_from"] == "the factory's tensors"
    assert report["extra"]["device"] == "cpu"
    assert json.loads(json.dumps(report))["extra"]["device"] != "auto"
