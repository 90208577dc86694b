"""Issue 26 on CUDA: the debug twin localises a NaN past an additive attention mask that holds
-inf by design, and the twin shares the release model's weights by default (``--twin-weights
auto``). The package is built by scripts/gpu_validation.sh (``masked_nan``: tests/integration/
models.py, built with ``--device cuda`` and no twin flag). The CPU counterpart, run in CI:
tests/integration/test_twin_printer.py."""

from __future__ import annotations

import json
import zipfile

import pytest

from .conftest import PKGS, findings, pkg, probe

pytestmark = pytest.mark.gpu


def _manifest(name: str) -> dict:  # type: ignore[type-arg]
    with zipfile.ZipFile(pkg(name)) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        return json.loads(zf.read(f"{root}/extra/aoti_guard/manifest.json"))  # type: ignore[no-any-return]


def test_the_default_cuda_twin_shares_the_release_weights_and_records_the_mask() -> None:
    report = json.loads(pkg("masked_nan").with_suffix(".build.json").read_text())
    assert report["passed"], [f["message"] for p in report["phases"] for f in p["findings"]]
    manifest = _manifest("masked_nan")
    twin = manifest["debug_twin_without_weights"]
    assert manifest["debug_twin"] is None and twin["weights"] == "release", twin
    names = twin["nonfinite"]["names"]  # the mask input and the scores buffer hold -inf by design
    assert any("-inf" in kinds for kinds in names.values()) and not any("nan" in kinds for kinds in names.values()), names


def test_the_escalation_names_the_nan_kernel_past_the_mask_on_cuda() -> None:
    bad = PKGS / "masked_nan_bad.safetensors"
    code, report, _ = probe("probe_masked_nan", str(pkg("masked_nan")), "--inputs", str(bad), preload=True)
    assert code == 1
    escalate = next(p for p in report["phases"] if p["name"] == "escalate")
    assert escalate["status"] == "failed", escalate
    named = [f for f in findings(report) if f["code"] == "run.nonfinite" and f["evidence"].get("kernel")]
    assert named, [f["message"] for f in findings(report)]
    assert "sqrt" in named[0]["evidence"]["kernel"], named[0]
    assert not str(named[0]["evidence"].get("buffer", "")).startswith("arg"), "the mask input was named"
