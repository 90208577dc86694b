"""The debug twin through an Inf the model holds by design (issue 26), with a real CPU package:
``masked_nan`` (tests/integration/models.py) takes an additive causal mask (-inf above the
diagonal) and turns NaN in its sqrt on a negative input. A twin with NaN asserts stopped at the
mask on every call; the printer twin records the mask as the build's baseline and the probe's
escalation names the sqrt's kernel."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from .conftest import Built
from .test_escalate import escalate_phase
from .test_probe import probe_json

pytestmark = pytest.mark.integration


def _manifest(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        name = next(n for n in zf.namelist() if n.endswith("extra/aoti_guard/manifest.json"))
        data: dict[str, Any] = json.loads(zf.read(name))
    return data


def test_the_build_records_the_mask_as_the_twins_baseline(masked_nan_pkg: Built) -> None:
    assert masked_nan_pkg.report is not None
    twin = _manifest(masked_nan_pkg.path)["debug_twin_without_weights"]
    names = twin["nonfinite"]["names"]
    assert names, "the twin recorded no non-finite value though the mask holds -inf"
    assert all(kinds == ["-inf"] for kinds in names.values()), names
    assert any(n.startswith("arg") for n in names), "the mask input is not in the baseline"
    twin_phase = next(p for p in masked_nan_pkg.report["phases"] if p["name"] == "debug_twin")  # the twin is checked after validation
    said = [f for f in twin_phase["findings"] if f["code"] == "build.nonfinite"]
    assert [f["severity"] for f in said] == ["info"], said  # intended: not a warning that the twin stops there
    assert "looks past them" in said[0]["hint"]


def test_the_escalation_names_the_nan_kernel_past_the_mask(masked_nan_pkg: Built, tmp_path: Path) -> None:
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    from .models import causal_mask

    x = torch.rand(2, 6, 16) + 0.5
    x[0, 1, 2] = -1.0
    inputs = tmp_path / "bad.safetensors"
    _safetensors.dump({"x": x, "mask": causal_mask(2, 6)}, inputs)
    proc, report = probe_json(masked_nan_pkg.path, tmp_path, "--inputs", str(inputs))
    assert proc.returncode == 1
    esc = escalate_phase(report)
    assert esc["status"] == "failed"
    [named] = [f for f in esc["findings"] if f["code"] == "run.nonfinite"]
    assert named["severity"] == "error" and "sqrt" in named["evidence"]["kernel"], named
    assert not named["evidence"]["buffer"].startswith("arg"), "the mask input was named"
    assert "the --inputs" in named["message"] and "NaN" in named["message"]
    twin = next(s for s in esc["detail"]["steps"] if s["step"] == "twin")
    assert twin["evidence"]["departure"]["kinds"] == ["nan"]
