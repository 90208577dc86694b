"""Golden coverage at any size (issue 26): a sample over ``--golden-max-mb`` reaches the probe in
compact form (recipes for its generated inputs, a subset of each output plus statistics), and the
generated inputs know attention masks (padded left and right) and ids."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import MANIFEST_SCHEMA_VERSION
from runtime_probe.runtime import layout

from .conftest import MODELS, Built, build_package, run_cli
from .test_probe import codes, probe_json, rewrite

pytestmark = pytest.mark.integration


def _capped(pkg_dir: Path, name: str, cap_mb: str) -> Built:
    """The mixed model (batch 2..32, no twin) built with a golden cap of ``cap_mb``."""
    built = build_package(
        pkg_dir, name, f"{MODELS}:mixed", "--no-debug-twin", "--golden-max-mb", cap_mb, "--dynamic", "x:0=batch:2..32",
        "--dynamic", "ids:0=batch",
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return built


@pytest.fixture(scope="session")
def tiny_cap_pkg(pkg_dir: Path) -> Built:
    """A 1 KB golden cap: max and mid do not fit whole."""
    return _capped(pkg_dir, "tinycap", "0.001")


def _generated(ids: Any) -> Any:
    """``ids`` without the half-precision edge samples (the mixed model's float16 ``scale`` gets
    them, runtime_probe/golden/recipe.py EDGES): these tests are about the generated ones."""
    if isinstance(ids, dict):
        return {k: v for k, v in ids.items() if not str(k).startswith("edge-")}
    kept = [i for i in ids if not str(i).startswith("edge-")]
    return set(kept) if isinstance(ids, set) else kept


def _golden(report: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in report["phases"] if p["name"] == "golden")["detail"]


def _manifest(path: Path) -> tuple[str, dict[str, Any]]:
    with zipfile.ZipFile(path) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        return root, json.loads(zf.read(f"{root}/{layout.MANIFEST}"))


def test_a_tiny_cap_keeps_every_sample_and_the_probe_checks_min_and_max(tiny_cap_pkg: Built, tmp_path: Path) -> None:
    assert tiny_cap_pkg.report is not None
    validate = next(p for p in tiny_cap_pkg.report["phases"] if p["name"] == "validate")
    stored = _generated({r["sample"]: r["stored"] for r in validate["detail"]["golden_storage"]})
    assert stored == {"example": "full", "min": "full", "max": "compact", "mid": "compact"}
    assert not any(f["code"] == "build.sample_dropped" for f in validate["findings"])
    assert "golden max (generated) stored compact (over the cap)" in tiny_cap_pkg.stdout
    _, m = _manifest(tiny_cap_pkg.path)
    assert m["schema_version"] == MANIFEST_SCHEMA_VERSION and tuple(int(p) for p in m["schema_version"].split(".")) >= (1, 5)
    compact = _generated({c["id"]: c for c in m["golden"]["compact_samples"]})
    assert set(compact) == {"max", "mid"} and compact["max"]["symbols"] == {"batch": 32}
    assert {r["input"]: r["kind"] for r in compact["max"]["recipes"]} == {"x": "pool", "ids": "ids", "scale": "pool"}
    proc, report = probe_json(tiny_cap_pkg.path, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    golden = _golden(report)
    assert _generated({r["sample"]: r.get("stored") for r in golden["runs"]}) == {
        "example": "full",
        "min": "full",
        "max": "compact",
        "mid": "compact",
    }
    assert "max (compact: output[0] 256 of 256 elements + 4 stats" in " ".join(golden["checked"])
    checked = next(line for line in proc.stdout.splitlines() if "checked: " in line)
    assert all(part in checked for part in ("example (full)", "min (full)", "max (compact")), checked


def test_a_compact_sample_whose_recipe_was_tampered_is_refused_not_run(tiny_cap_pkg: Built, tmp_path: Path) -> None:
    root, m = _manifest(tiny_cap_pkg.path)

    def huge(name: str, data: bytes) -> bytes:
        if name != f"{root}/{layout.MANIFEST}":
            return data
        r = m["golden"]["compact_samples"][0]["recipes"][0]
        r["shape"], r["stride"] = [1 << 40, 8], [8, 1]
        return json.dumps(m).encode()

    proc, report = probe_json(rewrite(tiny_cap_pkg.path, tmp_path / "huge.pt2", huge), tmp_path)
    found = [f for p in report["phases"] for f in p["findings"] if f["code"] == "golden.recipe_invalid"]
    assert len(found) == 1 and "the contract at these sizes says [32, 8]" in found[0]["message"]
    assert _generated({r["sample"] for r in _golden(report)["runs"]}) == {"example", "min", "mid"}  # the others still ran
    assert proc.returncode == 1


def test_a_recipe_that_does_not_regenerate_bit_exactly_is_said_not_judged(tiny_cap_pkg: Built, tmp_path: Path) -> None:
    root, m = _manifest(tiny_cap_pkg.path)

    def reseed(name: str, data: bytes) -> bytes:
        if name != f"{root}/{layout.MANIFEST}":
            return data
        m["golden"]["compact_samples"][1]["recipes"][0]["seed"] += 1  # other values than the build validated
        return json.dumps(m).encode()

    proc, report = probe_json(rewrite(tiny_cap_pkg.path, tmp_path / "reseed.pt2", reseed), tmp_path)
    assert "golden.recipe_mismatch" in codes(report) and "golden.mismatch" not in codes(report)
    assert "mid" not in {r["sample"] for r in _golden(report)["runs"]}
    assert proc.returncode == 0  # a warning: the sample could not be checked, the package is not judged wrong


def test_distilbert_is_validated_on_padded_attention_masks(guard_pkg: Any, tmp_path: Path) -> None:
    with zipfile.ZipFile(guard_pkg("distilbert")) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        raw = zf.read(f"{root}/{layout.GOLDEN}")
        m = json.loads(zf.read(f"{root}/{layout.MANIFEST}"))
    (tmp_path / "golden.safetensors").write_bytes(raw)
    tensors = _safetensors.load(tmp_path / "golden.safetensors")
    masks = {s["id"]: tensors[s["inputs"]["attention_mask"]] for s in m["golden"]["samples"]}
    assert bool((masks["example"] == 1).all())  # the factory's example: no padding
    rows = [row for sid in ("max", "mid") for row in masks[sid].tolist()]
    assert any(r[0] == 1 and r[-1] == 0 for r in rows) and any(r[0] == 0 and r[-1] == 1 for r in rows)  # right and left padding
    assert any(all(r) for r in rows)  # and rows without
    ids = tensors[next(s for s in m["golden"]["samples"] if s["id"] == "max")["inputs"]["input_ids"]]
    assert int(ids.min()) == 0 and int(ids.max()) == 999  # across the vocabulary, both ends


def test_the_zoo_guard_step_runs_the_compact_samples_too(tiny_cap_pkg: Built, tmp_path: Path) -> None:
    """zoo.parity's guard step (runtime_probe.load in a child) checks every stored sample, whole or
    compact, so its count equals the build's at any golden cap; a digest that the model's output
    does not match fails it."""
    from zoo import parity

    g = parity.guard_step("tinycap", str(tiny_cap_pkg.path), str(tmp_path), timeout=300)
    assert g["ok"], (g.get("error"), g.get("log_tail"))
    assert _generated({r["sample"]: r["stored"] for r in g["runs"]}) == {
        "example": "full",
        "min": "full",
        "max": "compact",
        "mid": "compact",
    }
    assert g["samples"] == len(g["runs"])  # every stored sample ran, the edge samples too
    assert next(r for r in g["runs"] if r["sample"] == "max")["checked"] == {
        "output[0]": "256 of 256 elements + 4 stats",
        "output[1]": "32 of 32 elements + 4 stats",
    }
    root, m = _manifest(tiny_cap_pkg.path)

    def off_sum(name: str, data: bytes) -> bytes:
        if name != f"{root}/{layout.MANIFEST}":
            return data
        digest = m["golden"]["compact_samples"][0]["outputs"][0]
        digest["sum"] += 1000 * (digest["sum_tol"] + 1.0)  # the stored subset still matches: the statistic alone fails
        return json.dumps(m).encode()

    bad = parity.guard_step("tinycap", str(rewrite(tiny_cap_pkg.path, tmp_path / "sum.pt2", off_sum)), str(tmp_path), timeout=300)
    assert not bad["ok"] and bad["samples"] == len(g["runs"])
    assert bad["error"].startswith("max (compact): output[0]") and "statistics out of tolerance: sum" in bad["error"], bad["error"]


def test_diff_names_the_samples_a_tiny_cap_stored_compact(mixed_pkg: Built, tiny_cap_pkg: Built) -> None:
    """The same model and flags but the cap: ``aoti-guard diff`` says which samples changed form
    (it used to compare the whole samples alone, and never saw max and mid)."""
    proc = run_cli("diff", str(mixed_pkg.path), str(tiny_cap_pkg.path))
    assert proc.returncode == 1, proc.stdout[-2000:]
    for sid in ("max", "mid"):
        assert re.search(rf"sample {sid} stored +whole -> compact \(recipes and output digests\)", proc.stdout), proc.stdout[-2000:]
    assert "sample example stored" not in proc.stdout and "sample min stored" not in proc.stdout


def test_verify_only_checks_the_compact_samples_records(tiny_cap_pkg: Built, tmp_path: Path) -> None:
    """``--verify-only`` runs no golden phase: the compact samples' records (recipes against the
    contract, their keys in the golden file) are checked in the archive phase, by the golden
    phase's own code, so a tampered recipe fails the pre-flight and not only the full probe."""
    proc, report = probe_json(tiny_cap_pkg.path, tmp_path, "--verify-only")
    archive = next(p for p in report["phases"] if p["name"] == "archive")
    assert proc.returncode == 0 and _generated(archive["detail"]["compact_samples_checked"]) == ["max", "mid"], proc.stdout[-2000:]
    root, m = _manifest(tiny_cap_pkg.path)

    def missing_pool(name: str, data: bytes) -> bytes:
        if name != f"{root}/{layout.MANIFEST}":
            return data
        m["golden"]["compact_samples"][0]["recipes"][0]["pool"] = "no such key"
        return json.dumps(m).encode()

    proc, report = probe_json(rewrite(tiny_cap_pkg.path, tmp_path / "nopool.pt2", missing_pool), tmp_path, "--verify-only")
    found = [f for p in report["phases"] for f in p["findings"] if f["code"] == "golden.recipe_invalid"]
    assert proc.returncode == 1 and len(found) == 1 and found[0]["phase"] == "archive", proc.stdout[-2000:]


@pytest.fixture(scope="session")
def all_compact_pkg(pkg_dir: Path) -> Built:
    """A 10-byte golden cap: no sample fits whole (the example, captured, is dropped; min, max and
    mid are kept compact)."""
    return _capped(pkg_dir, "allcompact", "0.00001")


def test_shapes_works_from_a_package_whose_samples_are_all_compact(all_compact_pkg: Built, tmp_path: Path) -> None:
    """probe --shapes said "this package has none" of a package whose golden samples were all over
    the cap: it now makes the first compact sample's inputs again from their recipes, and draws
    the resized ones from them."""
    _, m = _manifest(all_compact_pkg.path)
    assert m["golden"]["samples"] == [] and _generated({c["id"] for c in m["golden"]["compact_samples"]}) == {"min", "max", "mid"}
    saved = tmp_path / "saved"
    proc = run_cli("probe", str(all_compact_pkg.path), "--fast", "--shapes", "x:16x8", "--save-inputs", str(saved), "--json", "-")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = _golden(json.loads(proc.stdout))["runs"]
    shaped = next(r for r in runs if r["sample"] == "shapes")
    assert shaped["outputs"]["output[0]"]["shape"] == [16, 8]
    inputs = _safetensors.load(str(saved / "shapes.inputs.safetensors"))
    assert tuple(inputs["x"].shape) == (16, 8) and tuple(inputs["ids"].shape) == (16,)
    compact_ids = next(r for r in m["golden"]["compact_samples"][0]["recipes"] if r["input"] == "ids")
    assert compact_ids["low"] <= int(inputs["ids"].min()) and int(inputs["ids"].max()) <= compact_ids["high"]
