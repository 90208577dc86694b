"""float16 at the dtype's edge (issue 42, pytorch#183607 / #159239): the edge samples reach the
overflow the example never does, the stage bisection names Inductor's elision of precision casts
and verifies the remedy on the failing sample; the remedy builds; float16 that is fine stays green.

Each model is built once through the CLI (module fixture); the assertions read the JSON report.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Built, build_package, run_probe
from tests.integration.test_build import manifest_of

pytestmark = pytest.mark.integration

MODELS = Path(__file__).parent / "models_half.py"
REALBUGS = Path(__file__).parents[1] / "realbugs" / "models.py"
BF16_02 = 0.2001953125  # 0.2 as bfloat16 rounds it
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
        "nan": build_package(out, "nan", f"{MODELS}:nan_at_the_edge", "--no-debug-twin", *FLAG),
        "addsub": build_package(out, "addsub", f"{MODELS}:add_sub_bf16", "--no-debug-twin"),
        "threshold": build_package(out, "threshold", f"{REALBUGS}:bf16_threshold", "--no-debug-twin"),
        "flip": build_package(out, "flip", f"{MODELS}:threshold_flip", "--no-debug-twin"),
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
    assert "edge-threshold" not in b.stdout, "no comparison with a constant: no threshold sample"


def test_the_probe_passes_a_package_whose_edge_sample_gives_eagers_nan_and_fails_one_whose_nan_moved(
    built: dict[str, Built], tmp_path: Path
) -> None:
    import torch

    from runtime_probe.formats import safetensors
    from runtime_probe.runtime import layout

    b = built["nan"]
    assert b.returncode == 0 and b.path.exists(), b.stdout[-3000:]
    m = manifest_of(b.path)
    edge = next(s for s in m.golden.samples if s.id == "edge-overflow")
    probe = run_probe(str(b.path), "--json", str(tmp_path / "probe.json"))
    assert probe.returncode == 0, probe.stdout[-3000:]
    # the same package with the edge sample's reference NaN moved (its hash in the manifest made
    # to match, unsigned): the probe still fails it
    moved = tmp_path / "moved.pt2"
    with zipfile.ZipFile(b.path) as zin:
        root = zin.namelist()[0].split("/", 1)[0]
        tensors = safetensors.load(zin.read(f"{root}/{m.golden.entry}"))
        ref = tensors[edge.outputs["output"]]
        assert bool(ref.isnan().any()) and bool((~ref.isnan()).any()), "eager's NaN is in some places only"
        tensors[edge.outputs["output"]] = torch.where(ref.isnan(), torch.zeros_like(ref), torch.full_like(ref, float("nan")))
        golden = safetensors.dumps(tensors, {"format": "aoti-guard golden v2"})
        manifest = json.loads(zin.read(f"{root}/{layout.MANIFEST}"))
        manifest["hashes"][m.golden.entry] = hashlib.sha256(golden).hexdigest()
        with zipfile.ZipFile(moved, "w", zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                rel = info.filename.split("/", 1)[1]
                data = {m.golden.entry: golden, layout.MANIFEST: json.dumps(manifest).encode()}.get(rel) or zin.read(info)
                zout.writestr(info, data)
    failed = run_probe(str(moved), "--json", str(tmp_path / "moved.json"))
    report = json.loads((tmp_path / "moved.json").read_text())
    mismatch = [f for p in report["phases"] for f in p["findings"] if f["code"] == "golden.mismatch"]
    assert failed.returncode != 0 and mismatch and "edge-overflow" in mismatch[0]["message"], failed.stdout[-3000:]


def test_an_edge_sample_keeps_its_own_tolerance_and_never_widens_the_ordinary_samples(built: dict[str, Built]) -> None:
    b = built["addsub"]
    assert b.returncode == 0 and b.report is not None, b.stdout[-3000:]
    assert not _findings(b.report, "build.tolerance_wide"), "no ordinary sample's check was widened"
    m = manifest_of(b.path)
    (shared,) = m.golden.tolerances
    records = [*m.golden.samples, *(m.golden.compact_samples or ())]
    (own,) = next(s for s in records if s.id == "edge-rounding").tolerances
    assert "edge" not in str(shared.origin) and own.atol > shared.atol, (shared, own)
    assert all(s.tolerances is None for s in records if not s.id.startswith("edge-"))
    probe = run_probe(str(b.path))
    assert probe.returncode == 0, probe.stdout[-3000:]


def test_a_bfloat16_threshold_gets_a_sample_at_the_rounded_constant_that_the_probe_checks(built: dict[str, Built]) -> None:
    """pytorch#128306: torch 2.13 and 2.15 compile it as eager computes it, so the sample is made,
    stored, and checked by the probe; torch 2.11's package compares in float32 and is refused on
    this sample alone."""
    from runtime_probe.formats import safetensors

    b = built["threshold"]
    assert b.report is not None, b.stdout[-3000:]
    if b.returncode == 1:  # torch 2.11 (pytorch#128306): no other sample reaches the flip
        failed = _findings(b.report, "build.validation_failed")
        assert failed and {f["evidence"]["sample"] for f in failed} == {"edge-threshold"}, b.stdout[-3000:]
        return
    assert b.returncode == 0, b.stdout[-3000:]
    m = manifest_of(b.path)
    sample = next(s for s in m.golden.samples if s.id == "edge-threshold")
    with zipfile.ZipFile(b.path) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        scores = safetensors.load(zf.read(f"{root}/{m.golden.entry}"))[sample.inputs["scores"]]
    assert BF16_02 in scores.double().flatten().tolist(), scores
    probe = run_probe(str(b.path))
    assert probe.returncode == 0 and "edge-threshold" in probe.stdout, probe.stdout[-3000:]


def test_a_comparison_that_flips_at_the_threshold_is_refused_there_with_inductor_named(built: dict[str, Built]) -> None:
    b = built["flip"]
    assert b.returncode == 1 and b.report is not None, b.stdout[-3000:]
    failed = _findings(b.report, "build.validation_failed")
    assert failed and {f["evidence"]["sample"] for f in failed} == {"edge-threshold"}, "only the threshold sample reaches it"
    assert all(f["severity"] == "error" and "float64" not in f["expected"] for f in failed), "float64 sides with the package there"
    stage = next(f for f in _findings(b.report, "build.first_divergence") if f["severity"] == "error")
    assert stage["evidence"]["first"] == "inductor", stage
