"""Issue 24, export guards are part of the contract: real CPU packages built through the CLI.

A model that branches on ``h*w == 64``, exported from an 8x8 example with both sizes dynamic:
torch.export keeps the guard, ``ep.module()`` enforces it, AOTInductor does not, so the bare
package computes sin(x) + 1 for every size. The build must name the guard and fail; with
--allow-export-guards it records the guard and the guarded loader enforces it by name. The same
for a relation (``x.shape[0] == y.shape[0]``) of two dims declared apart.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import MANIFEST_SCHEMA_VERSION
from runtime_probe.reporting.errors import InputContractError

from .conftest import MODELS, Built, build_package, run_cli
from .test_probe import probe_json

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def branch_refused(pkg_dir: Path) -> Built:
    return build_package(pkg_dir, "size_branch", f"{MODELS}:size_branch", "--no-debug-twin")


@pytest.fixture(scope="module")
def branch_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "size_branch_ok", f"{MODELS}:size_branch", "--no-debug-twin", "--allow-export-guards")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return built


@pytest.fixture(scope="module")
def relation_refused(pkg_dir: Path) -> Built:
    return build_package(pkg_dir, "size_relation", f"{MODELS}:size_relation", "--no-debug-twin")


@pytest.fixture(scope="module")
def relation_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "size_relation_ok", f"{MODELS}:size_relation", "--no-debug-twin", "--allow-export-guards")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return built


def _findings(built: Built, code: str) -> list[dict[str, Any]]:
    assert built.report is not None, built.stdout[-2000:] + built.stderr[-2000:]
    return [f for p in built.report["phases"] for f in p["findings"] if f["code"] == code]


def _manifest(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        root = zf.namelist()[0].split("/")[0]
        data: dict[str, Any] = json.loads(zf.read(f"{root}/extra/aoti_guard/manifest.json"))
        return data


def test_the_build_names_the_guard_the_dims_and_the_sizes_the_bare_package_gets_wrong(branch_refused: Built) -> None:
    assert branch_refused.returncode == 1, branch_refused.stdout[-2000:]
    (finding,) = _findings(branch_refused, "build.export_specialized")
    assert finding["severity"] == "error" and finding["phase"] == "export"
    assert "(L['x'].size()[1]*L['x'].size()[2]) == 64" in finding["message"] and "h*w == 64" in finding["message"]
    assert "x.shape[1] (h), x.shape[2] (w)" in finding["message"]
    assert "every (h, w) with h*w != 64" in finding["message"]
    assert "min (h=2, w=2)" in finding["found"] and "max (h=32, w=32)" in finding["found"]
    for fix in (
        "an example that takes the general branch",
        "torch._check(h*w == 64)",
        "torch.cond",
        "static dims",
        "--allow-export-guards",
    ):
        assert fix in finding["hint"], fix
    # the build went on to measure it: the samples that break the guard are the evidence
    wrong = _findings(branch_refused, "build.validation_failed")
    assert any("sample min (h=2, w=2)" in f["message"] for f in wrong)
    assert not branch_refused.path.exists() and branch_refused.path.with_suffix(".rejected.pt2").exists()


def test_the_accepted_guard_is_recorded_and_the_samples_satisfy_it(branch_pkg: Built) -> None:
    (finding,) = _findings(branch_pkg, "build.export_specialized")
    assert finding["severity"] == "warning"
    m = _manifest(branch_pkg.path)
    assert m["schema_version"] == MANIFEST_SCHEMA_VERSION  # guards since 1.4
    (guard,) = m["io"]["guards"]
    assert guard["expr"] == "h * w == 64" and guard["words"] == "h*w must equal 64" and guard["arguments"] == ["x"]
    assert guard["text"] == "(L['x'].size()[1]*L['x'].size()[2]) == 64"
    samples = m["golden"]["samples"]
    assert len(samples) >= 2
    assert all(s["symbols"]["h"] * s["symbols"]["w"] == 64 for s in samples), samples
    assert not _findings(branch_pkg, "build.coverage_incomplete")


def test_the_guarded_loader_refuses_a_size_that_breaks_the_guard_by_name(branch_pkg: Built) -> None:
    import torch

    import runtime_probe

    model = runtime_probe.load(branch_pkg.path)
    with pytest.raises(InputContractError) as info:
        model(torch.randn(2, 4, 4))
    err = info.value
    assert (err.code, err.argument) == ("input.guard", "x")
    assert "x: h*w must equal 64, found h=4 (x.shape[1]), w=4 (x.shape[2]) (h*w = 16)" in str(err)
    for shape in [(2, 8, 8), (2, 4, 16), (2, 16, 4)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(model(x), x.sin() + 1)
    # what the guard protects from: the bare package computes the traced branch for 4x4
    from torch._inductor import aoti_load_package

    x = torch.randn(2, 4, 4)
    assert float((aoti_load_package(str(branch_pkg.path))(x) - x.cos() * 2).abs().max()) > 0.5


def test_probe_inputs_refuses_a_file_that_breaks_the_guard(branch_pkg: Built, tmp_path: Path) -> None:
    import torch

    bad = tmp_path / "bad.safetensors"
    _safetensors.dump({"x": torch.randn(2, 4, 4)}, str(bad))
    proc, report = probe_json(branch_pkg.path, tmp_path, "--inputs", str(bad), "--no-escalate")
    assert proc.returncode == 1, proc.stdout[-2000:]
    (finding,) = [f for p in report["phases"] for f in p["findings"] if f["code"] == "input.guard"]
    assert finding["evidence"]["argument"] == "x" and "h*w must equal 64" in finding["message"]
    good = tmp_path / "good.safetensors"
    _safetensors.dump({"x": torch.randn(2, 4, 16)}, str(good))
    proc, report = probe_json(branch_pkg.path, tmp_path, "--inputs", str(good), "--no-escalate")
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_inspect_shows_the_guard(branch_pkg: Built) -> None:
    proc = run_cli("inspect", str(branch_pkg.path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "guard    h*w must equal 64  (checked at load as h * w == 64; torch: (L['x'].size()[1]*L['x'].size()[2]) == 64)" in proc.stdout


def test_a_relation_of_dims_declared_apart_fails_the_build(relation_refused: Built) -> None:
    assert relation_refused.returncode == 1, relation_refused.stdout[-2000:]
    (finding,) = _findings(relation_refused, "build.export_specialized")
    assert finding["severity"] == "error"
    assert (
        "x.shape[0] == y.shape[0]" in finding["message"]
        and "relates the declared dynamic dims x.shape[0], y.shape[0]" in finding["message"]
    )
    assert "one Dim for x.shape[0] and y.shape[0]" in finding["hint"]
    assert not relation_refused.path.exists() and relation_refused.path.with_suffix(".rejected.pt2").exists()


def test_an_accepted_relation_is_enforced_at_load(relation_pkg: Built) -> None:
    import torch

    import runtime_probe

    (guard,) = _manifest(relation_pkg.path)["io"]["guards"]
    assert guard["words"] == "x.shape[0] must equal y.shape[0]" and guard["arguments"] == ["x", "y"]
    model = runtime_probe.load(relation_pkg.path)
    x, y = torch.randn(5, 2), torch.randn(5, 2)
    torch.testing.assert_close(model(x, y), x + y)
    with pytest.raises(InputContractError) as info:
        model(torch.randn(3, 2), torch.randn(5, 2))
    assert info.value.argument == "y" and "x.shape[0]" in str(info.value)
