"""Issue 26: golden samples of the user's own (build --samples FILE.safetensors, BuildSpec(samples=...)).

A real package of the bundled example model (batch 1..64) built with two files of its inputs: the
samples are validated like the generated ones, stored in the package, listed by the build report,
inspect and the probe, and the probe checks them (a stored output changed fails on that sample).
A bad file is a usage error (exit 2) before anything compiles.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from aoti_guard.builder.resolve.example import example_spec
from runtime_probe.formats import safetensors as st
from runtime_probe.runtime import layout

from .conftest import MODELS, Built, build_package, run_cli, run_probe

pytestmark = pytest.mark.integration


def _inputs(batch: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(batch, 16, generator=gen), "mask": torch.rand(batch, 32, generator=gen) > 0.5}


@pytest.fixture(scope="module")
def samples_pkg(pkg_dir: Path) -> Built:
    folder = pkg_dir / "user-samples"
    folder.mkdir()
    st.dump(_inputs(3, 1), str(folder / "req-a.safetensors"))
    st.dump(_inputs(20, 2), str(folder / "req-b.safetensors"))
    built = build_package(
        folder,
        "with-samples",
        None,
        "--no-debug-twin",
        "--samples",
        str(folder / "req-a.safetensors"),
        "--samples",
        str(folder / "req-b.safetensors"),
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return built


def _phase(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["phases"] if p["name"] == name)


def test_the_build_report_lists_the_users_samples(samples_pkg: Built) -> None:
    assert samples_pkg.report is not None
    validate = _phase(samples_pkg.report, "validate")
    assert validate["detail"]["samples"][-2:] == ["req-a", "req-b"]
    rows = validate["detail"]["user_samples"]
    assert [(r["id"], Path(r["source"]).name, r["symbols"]) for r in rows] == [
        ("req-a", "req-a.safetensors", {"batch": 3}),
        ("req-b", "req-b.safetensors", {"batch": 20}),
    ]
    assert 3 in validate["detail"]["coverage"]["batch"]["tested"] and 20 in validate["detail"]["coverage"]["batch"]["tested"]
    assert "your samples: req-a (from " in samples_pkg.stdout + samples_pkg.stderr


def test_inspect_shows_the_samples_stored(samples_pkg: Built) -> None:
    proc = run_cli("inspect", str(samples_pkg.path), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    golden = json.loads(proc.stdout)["manifest"]["golden"]
    stored = {s["id"]: s for s in golden["samples"]}
    assert stored["req-a"]["symbols"] == {"batch": 3} and stored["req-b"]["symbols"] == {"batch": 20}
    assert set(stored["req-a"]["outputs"]) == {"output"}  # with the eager reference the probe compares against


def test_the_probe_checks_the_users_samples(samples_pkg: Built, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    proc = run_probe(str(samples_pkg.path), "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    golden = _phase(json.loads(out.read_text()), "golden")
    runs = {r["sample"]: r for r in golden["detail"]["runs"]}
    assert {"req-a", "req-b"} <= set(runs) and golden["status"] == "passed"


def test_a_changed_stored_output_of_a_users_sample_fails_the_probe(samples_pkg: Built, tmp_path: Path) -> None:
    """The stored reference of req-b moved by 1.0 (the manifest's hash updated, so the archive's
    trust checks pass): the golden phase fails on that sample, not on the others."""
    tampered = tmp_path / "tampered.pt2"
    with zipfile.ZipFile(samples_pkg.path) as zin:
        names = zin.namelist()
        root = names[0].split("/", 1)[0]
        manifest = json.loads(zin.read(f"{root}/{layout.MANIFEST}"))
        entry = manifest["golden"]["entry"]
        key = next(s for s in manifest["golden"]["samples"] if s["id"] == "req-b")["outputs"]["output"]
        tensors = st.load(zin.read(f"{root}/{entry}"))
        tensors[key] = tensors[key] + 1.0
        golden = st.dumps(tensors, {"format": "aoti-guard golden v1"})
        manifest["hashes"][entry] = hashlib.sha256(golden).hexdigest()
        with zipfile.ZipFile(tampered, "w", zipfile.ZIP_STORED) as zout:
            for name in names:
                data = zin.read(name)
                if name == f"{root}/{entry}":
                    data = golden
                elif name == f"{root}/{layout.MANIFEST}":
                    data = json.dumps(manifest).encode()
                zout.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    out = tmp_path / "probe.json"
    proc = run_probe(str(tampered), "--json", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert _phase(report, "archive")["status"] == "passed"
    mismatches = [f for f in _phase(report, "golden")["findings"] if f["code"] == "golden.mismatch"]
    assert mismatches and all("req-b" in f["message"] for f in mismatches), mismatches


def test_a_sample_outside_the_contract_is_a_usage_error_before_compiling(tmp_path: Path) -> None:
    bad = tmp_path / "too-big.safetensors"
    st.dump(_inputs(65, 3), str(bad))  # batch 65: the example model takes 1..64
    proc = run_cli("build", "-o", str(tmp_path / "m.pt2"), "--no-debug-twin", "--samples", str(bad))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"sample file {bad}: x: dim 0 is 65, above the maximum 64 of 'batch'" in proc.stderr
    assert "Traceback" not in proc.stderr and "[compile] start" not in proc.stderr
    assert not (tmp_path / "m.pt2").exists()


def test_a_missing_samples_file_is_refused_at_once(tmp_path: Path) -> None:
    proc = run_cli("build", f"{MODELS}:static", "-o", str(tmp_path / "m.pt2"), "--samples", str(tmp_path / "nope.safetensors"))
    assert proc.returncode == 2 and "no such file" in proc.stderr and "[export] start" not in proc.stderr, proc.stderr


def test_the_library_takes_samples_in_the_build_spec(tmp_path: Path) -> None:
    """BuildSpec(samples=[mapping, path]) through aoti_guard.build: validated, stored, reported."""
    import aoti_guard

    path = tmp_path / "req.safetensors"
    st.dump(_inputs(7, 4), str(path))
    spec = example_spec()
    spec.samples = [_inputs(2, 5), str(path)]
    report = aoti_guard.build(spec, aoti_guard.BuildOptions(output=str(tmp_path / "lib.pt2"), debug_twin=False))
    assert report.passed, [f.message for p in report.phases for f in p.findings]
    validate = next(p for p in report.phases if p.name == "validate")
    assert [(r["id"], r["symbols"]) for r in validate.detail["user_samples"]] == [("user1", {"batch": 2}), ("req", {"batch": 7})]
    with zipfile.ZipFile(tmp_path / "lib.pt2") as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        manifest = json.loads(zf.read(f"{root}/{layout.MANIFEST}"))
    assert {"user1", "req"} <= {s["id"] for s in manifest["golden"]["samples"]}
