"""A debug twin without weights of its own (``--twin-weights shared``, the default on CPU): the
package stores the weights once, and every path that runs the twin gives it the release model's
first: the build's twin check, the probe's escalation, the guarded loader."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.child.worker import ChildRaised, Worker
from runtime_probe.package.archive import open_archive
from runtime_probe.package.manifest import parse_manifest
from runtime_probe.package.twin import materialize_twin
from runtime_probe.runtime import layout

from .conftest import MODELS, Built, build_package
from .test_escalate import escalate_phase
from .test_probe import codes, probe_json

pytestmark = pytest.mark.integration

WEIGHT_BYTES = 2 * (512 * 512 + 512) * 4  # WeightedSqrt's two Linear(512, 512), float32


@pytest.fixture(scope="module")
def shared_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "weighted-shared", f"{MODELS}:weighted_sqrt")  # auto: shared on CPU
    assert built.returncode == 0, built.stdout + built.stderr
    return built


@pytest.fixture(scope="module")
def own_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "weighted-own", f"{MODELS}:weighted_sqrt", "--twin-weights", "own")
    assert built.returncode == 0, built.stdout + built.stderr
    return built


def _sizes(path: Path) -> tuple[int, int]:
    """(release .so bytes, twin .so bytes) as stored."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    release = sum(i.file_size for i in infos if "/data/aotinductor/model/" in i.filename and i.filename.endswith(".so"))
    twin = sum(i.file_size for i in infos if f"/{layout.TWIN_DIR}" in i.filename and i.filename.endswith(".so"))
    return release, twin


def _manifest_json(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        return json.loads(zf.read(f"{root}/{layout.MANIFEST}"))


def test_the_shared_twin_holds_no_second_copy_of_the_weights(shared_pkg: Built, own_pkg: Built) -> None:
    release, twin = _sizes(shared_pkg.path)
    own_release, own_twin = _sizes(own_pkg.path)
    assert own_release > WEIGHT_BYTES
    assert release > WEIGHT_BYTES and own_twin > WEIGHT_BYTES  # both copies where the twin has its own
    assert twin < release - WEIGHT_BYTES * 0.9, (release, twin)
    assert shared_pkg.path.stat().st_size < own_pkg.path.stat().st_size - WEIGHT_BYTES * 0.9
    twin_phase = next(p for p in shared_pkg.report["phases"] if p["name"] == "debug_twin")["detail"]["check"]  # type: ignore[index]
    assert twin_phase["kernels"] and twin_phase["max_abs_vs_release"] == 0.0  # it ran on the release weights at build time


def test_a_reader_of_schema_1_2_sees_no_twin_it_would_crash(shared_pkg: Built, own_pkg: Built) -> None:
    """Readers before 1.3 ignore unknown keys: the weightless twin must not sit under debug_twin,
    where they would load it without constants and crash on its first call."""
    shared = _manifest_json(shared_pkg.path)
    # 1.4 added io.guards, 1.5 compact golden samples, 1.6 runtime_fqn, 1.7 the tolerances' origins,
    # in_state_dict, tied_with and kept_constants, 1.8 user_code, references and data checks; the twin keys are as in 1.3
    assert shared["schema_version"] == "1.8"
    assert shared["debug_twin"] is None and shared["debug_twin_without_weights"]["weights"] == "release"
    assert "aot_inductor.package_constants_in_so" in shared["debug_twin_without_weights"]["inductor_configs"]
    own = _manifest_json(own_pkg.path)
    assert own["debug_twin"]["weights"] == "own" and own["debug_twin_without_weights"] is None


def test_the_guarded_loader_runs_either_twin_like_the_release_model(shared_pkg: Built, own_pkg: Built) -> None:
    script = """
import sys, torch, runtime_probe
x = torch.rand(4, 512) + 0.5
for path in sys.argv[1:]:
    release = runtime_probe.load(path)(x)
    twin = runtime_probe.load(path, model="debug_twin")(x)
    print(float((release - twin).abs().max()), float(release.abs().max()))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script, str(shared_pkg.path), str(own_pkg.path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [tuple(float(v) for v in line.split()) for line in proc.stdout.split("\n") if line and line[0].isdigit()]
    assert len(rows) == 2
    for diff, scale in rows:
        assert scale > 0.1 and diff <= 1e-6 * scale  # the same weights: zeros would differ by the scale


def test_the_probe_escalates_to_the_shared_twin(shared_pkg: Built, tmp_path: Path) -> None:
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    x = torch.rand(4, 512) + 0.5
    x[2, 7] = -1.0
    inputs = tmp_path / "bad.safetensors"
    _safetensors.dump({"x": x}, inputs)
    proc, report = probe_json(shared_pkg.path, tmp_path, "--inputs", str(inputs))
    assert proc.returncode == 1 and "run.nonfinite" in codes(report)
    steps = {s["step"]: s for s in escalate_phase(report)["detail"]["steps"]}
    # the twin loaded, took the release weights and ran to its NaN assert (a twin without them crashes)
    assert not steps["twin"]["outcome"].startswith("crashed"), steps["twin"]
    assert any("sqrt" in k for k in steps["twin"]["evidence"]["launched"]), steps["twin"]


def test_a_twin_given_another_models_constants_is_refused_not_run(shared_pkg: Built, example_pkg: Built, tmp_path: Path) -> None:
    """The release model of another package lacks the twin's constants: load_constants with a full
    update refuses, and the twin is never called with null weights."""
    archive, _ = open_archive(shared_pkg.path)
    assert archive is not None
    with archive:
        manifest = parse_manifest(archive.read(layout.MANIFEST, max_bytes=1 << 24))
        twin_path = materialize_twin(archive, manifest, str(tmp_path))
    assert twin_path is not None
    worker = Worker()
    try:
        with pytest.raises(ChildRaised) as info:
            worker.request(
                "load",
                120,
                key="twin",
                path=twin_path,
                model_name=layout.TWIN_MODEL,
                constants_from={"path": str(example_pkg.path), "model_name": layout.RELEASE_MODEL},
            )
        assert "did not take the release model's constants" in str(info.value)
        assert worker.request("ping", 30) is not None  # the child is alive: nothing ran
    finally:
        worker.close()


def test_parse_manifest_reads_the_twin_from_either_key(shared_pkg: Built, own_pkg: Built) -> None:
    for built, weights in ((shared_pkg, "release"), (own_pkg, "own")):
        with zipfile.ZipFile(built.path) as zf:
            root = zf.namelist()[0].split("/", 1)[0]
            manifest = parse_manifest(zf.read(f"{root}/{layout.MANIFEST}"))
        assert manifest.twin is not None and manifest.twin.weights == weights


def test_a_manifest_that_gives_the_shared_twin_weights_it_lacks_is_refused(shared_pkg: Built, tmp_path: Path) -> None:
    """The lie that would crash a reader: the weightless twin moved under debug_twin as "own"
    (the manifest is not covered by its own hashes; only a signature covers it). The twin's
    wrapper.cpp says include_weights=false: refused before any native code, by the probe and by the
    guarded loader alike."""
    lying = tmp_path / "lying.pt2"
    with zipfile.ZipFile(shared_pkg.path) as src, zipfile.ZipFile(lying, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(layout.MANIFEST):
                m = json.loads(data)
                m["debug_twin"], m["debug_twin_without_weights"] = {**m["debug_twin_without_weights"], "weights": "own"}, None
                data = json.dumps(m).encode()
            dst.writestr(info, data)
    proc, report = probe_json(lying, tmp_path)
    assert proc.returncode == 1
    refused = [f["message"] for f in report["phases"][0]["findings"] if f["code"] == "manifest.invalid"]
    assert any("include_weights=false" in msg for msg in refused), refused
    script = f"""
import runtime_probe
try:
    runtime_probe.load({str(lying)!r}, model="debug_twin")
    print("LOADED")
except runtime_probe.PackageRejected as exc:
    print("REJECTED", [f.code for f in exc.findings])
"""
    guarded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert guarded.returncode == 0 and "REJECTED" in guarded.stdout and "manifest.invalid" in guarded.stdout, (
        guarded.stdout + guarded.stderr[-2000:]
    )
