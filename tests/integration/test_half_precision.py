"""float16 at the dtype's edge (issue 42, pytorch#183607 / #159239): the edge samples reach the
overflow the example never does, the stage bisection names Inductor's elision of precision casts
and verifies the remedy on the failing sample; the remedy builds; float16 that is fine stays green.

Each model is built once through the CLI (module fixture); the assertions read the JSON report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Built, build_package, run_probe

pytestmark = pytest.mark.integration

MODELS = Path(__file__).parent / "models_half.py"
FLAG = ("--inductor-config", "emulate_precision_casts=true")


def _findings(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for p in report["phases"] for f in p["findings"] if f["code"] == code]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    out = tmp_path_factory.mktemp("half")
    return {
        "overflow": build_package(out, "overflow", f"{MODELS}:overflow", "--no-debug-twin"),
        "remedied": build_package(out, "remedied", f"{MODELS}:overflow", "--no-debug-twin", *FLAG),
        "mlp": build_package(out, "mlp", f"{MODELS}:mlp_fp16", "--no-debug-twin"),
    }


def test_float16_overflow_is_refused_with_the_elided_casts_named_and_the_remedy_verified(built: dict[str, Built]) -> None:
    b = built["overflow"]
    assert b.returncode == 1 and b.report is not None, b.stdout[-3000:]
    failed = _findings(b.report, "build.validation_failed")
    assert failed and all(f["evidence"]["sample"].startswith("edge-") for f in failed), "the example alone never overflows"
    stage = next(f for f in _findings(b.report, "build.first_divergence") if f["severity"] == "error")
    assert stage["evidence"]["first"] in ("inductor", "package")
    assert "Inductor elides the float16 casts eager performs (upcast intermediates)" in stage["message"]
    assert "VERIFIED" in stage["message"] and "rebuild with --inductor-config emulate_precision_casts=true" in stage["hint"]
    assert stage["evidence"]["remedy"]["verified"] is True and stage["evidence"]["remedy"]["sample"] == stage["evidence"]["sample"]
    assert not [p for p in b.report["phases"] if p["name"] == "minify"], "a verified cause leaves the minifier nothing to find"
    assert "Traceback" not in b.stdout + b.stderr


def test_the_same_model_built_with_the_remedy_builds_and_its_probe_checks_the_edge_samples(built: dict[str, Built]) -> None:
    b = built["remedied"]
    assert b.returncode == 0 and b.path.exists(), b.stdout[-3000:]
    probe = run_probe(str(b.path))
    assert probe.returncode == 0, probe.stdout[-3000:]
    assert "edge-overflow" in probe.stdout and "edge-max" in probe.stdout


def test_float16_that_is_fine_at_the_edge_stays_green(built: dict[str, Built]) -> None:
    b = built["mlp"]
    assert b.returncode == 0 and b.report is not None, b.stdout[-3000:]
    assert not [f for p in b.report["phases"] for f in p["findings"] if f["severity"] in ("error", "warning")]
    assert "edge-overflow" in b.stdout, "the edge samples were made and validated"
