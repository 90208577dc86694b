"""A derived size on the command line (``--dynamic x:1=8*seq8:1..8``), end to end.

torch.export refuses a free sequence length for a model that needs multiples of 8, and suggests
``seq = 8*_seq``. The build's finding must hand that suggestion on, and the command line must be
able to take it: the second build passes, with golden samples at seq8's minimum and maximum and
the derived size computed from them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.conftest import MODELS, build_package, run_cli


def _finding(report: dict, code: str) -> dict:  # type: ignore[type-arg]
    return next(f for p in report["phases"] for f in p["findings"] if f["code"] == code)


def test_export_suggestion_is_in_the_hint_and_the_cli_takes_it(pkg_dir: Path) -> None:
    refused = build_package(pkg_dir, "groups8_free", f"{MODELS}:groups8", "--no-debug-twin", "--dynamic", "x:1=seq:1..64")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.report is not None
    finding = _finding(refused.report, "build.export_failed")
    assert "torch.export suggests:" in finding["hint"]
    assert "seq = 8*_seq" in finding["hint"] and "_seq = Dim('_seq'" in finding["hint"]
    assert "--dynamic x:1=8*_seq:1..8" in finding["hint"]  # asked 1..64: the multiples of 8 in it, 8..64
    assert "Traceback" not in refused.stdout + refused.stderr

    built = build_package(pkg_dir, "groups8", f"{MODELS}:groups8", "--no-debug-twin", "--dynamic", "x:1=8*seq8:1..8")
    assert built.returncode == 0, built.stdout + built.stderr
    assert built.report is not None
    validate = next(p for p in built.report["phases"] if p["name"] == "validate")
    seq8 = validate["detail"]["coverage"]["seq8"]
    # export gives seq8 alone [2, 8] but keeps 8*seq8 in [8, 64], and the checks accept an input of
    # 8: the samples go to seq8 = 1, and the manifest says 1..8
    assert (seq8["min"], seq8["max"]) == (1, 8), seq8
    assert 1 in seq8["tested"] and 8 in seq8["tested"], seq8
    inspected = run_cli("inspect", "--json", str(built.path))
    manifest = json.loads(inspected.stdout)["manifest"]
    assert manifest["io"]["symbols"] == [{"name": "seq8", "min": 1, "max": 8, "sources": [], "value_of": None}]
    text = run_cli("inspect", str(built.path)).stdout  # no empty "()" after a symbol no input dim equals
    assert "symbol   seq8 in [1, 8]  (in derived sizes only: no input dimension equals it)" in text, text
    assert "--json takes a PATH now" in inspected.stderr  # the old switch form still works, with a warning
    out_shape = manifest["io"]["outputs"][0]["tensor"]
    assert out_shape["shape"][1] == {"expr": "seq8", "min": 1, "max": 8}
    assert out_shape["stride"] == ["seq8", 1]  # the user's name, not torch's s9
