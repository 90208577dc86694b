"""``aoti-guard references`` (issue 43): a weights rotation validated, not just NaN-checked.

The probe given new weights can only check for NaN/Inf (``constants.new_weights``); references
made on the build side for those weights, against the same compiled package, let
``probe OUT --weights NEW`` compare the outputs again."""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.runtime import layout

from .conftest import MODELS, Built, run_cli
from .test_golden_compact import tiny_cap_pkg  # noqa: F401 - the session fixture, shared
from .test_probe import codes, probe_json

pytestmark = pytest.mark.integration


def _model(factory: str) -> Any:
    sys.path.insert(0, str(MODELS.parent))
    import models

    sys.path.pop(0)
    made = getattr(models, factory)()
    return made.model if hasattr(made, "model") else made[0]


def _weights(factory: str, tmp_path: Path, edit: Callable[[dict[str, Any]], None], name: str = "new.safetensors") -> Path:
    from safetensors.torch import save_file

    sd = {k: v.detach().clone() for k, v in _model(factory).state_dict().items()}
    edit(sd)
    path = tmp_path / name
    save_file(sd, str(path))
    return path


def _manifest(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        return json.loads(zf.read(f"{root}/{layout.MANIFEST}"))  # type: ignore[no-any-return]


def _golden_phase(report: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in report["phases"] if p["name"] == "golden")


def test_new_weights_are_compared_with_the_references_made_for_them(static_pkg: Built, tmp_path: Path) -> None:
    new = _weights("static", tmp_path, lambda sd: sd.__setitem__("lin.bias", sd["lin.bias"] + 0.5))
    out = tmp_path / "rotated.pt2"
    made = run_cli("references", str(static_pkg.path), f"{MODELS}:static", "--weights", str(new), "-o", str(out))
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    assert "unsigned" in made.stdout and f"aoti-guard sign {out} --key KEY" in made.stdout, made.stdout

    proc, report = probe_json(out, tmp_path, "--weights", str(new))
    assert proc.returncode == 0 and "NOT CHECKED" not in proc.stdout, proc.stdout[-3000:]
    assert _golden_phase(report)["detail"]["compared"] is True and "constants.new_weights" not in codes(report)

    # the references are the eager model's with the new weights, on the package's own inputs
    import torch

    model = _model("static")
    model.load_state_dict(_safetensors.load(str(new)))
    m = _manifest(out)
    assert m["golden"]["references"]["weights"] == "new.safetensors" and m["golden"]["references"]["model"] == "static (models.py)"
    with zipfile.ZipFile(out) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        golden = _safetensors.load(zf.read(f"{root}/{m['golden']['entry']}"))
    for s in m["golden"]["samples"]:
        with torch.no_grad():
            expected = model(golden[s["inputs"]["x"]])
        assert torch.equal(golden[s["outputs"]["output"]], expected), s["id"]
    assert {c["fqn"]: c["sha256"] for c in m["constants"]} != {c["fqn"]: c["sha256"] for c in _manifest(static_pkg.path)["constants"]}


def test_without_the_weights_the_probe_says_the_references_were_not_compared(static_pkg: Built, tmp_path: Path) -> None:
    new = _weights("static", tmp_path, lambda sd: sd.__setitem__("lin.weight", sd["lin.weight"] * 1.01))
    out = tmp_path / "rotated.pt2"
    assert run_cli("references", str(static_pkg.path), f"{MODELS}:static", "--weights", str(new), "-o", str(out)).returncode == 0
    proc, report = probe_json(out, tmp_path)
    assert proc.returncode == 0 and "constants.references_need_weights" in codes(report), proc.stdout[-2000:]
    assert _golden_phase(report)["detail"]["compared"] is False
    lines = proc.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("PASSED"))
    assert lines[verdict + 1].startswith("  NOT CHECKED: the golden references were made for the weights new.safetensors"), proc.stdout
    assert "--weights new.safetensors" in lines[verdict + 2]
    # the build's own weights are not those the references were made for either
    original = _weights("static", tmp_path, lambda sd: None, name="build.safetensors")
    proc, report = probe_json(out, tmp_path, "--weights", str(original))
    assert proc.returncode == 0 and "constants.new_weights" in codes(report), proc.stdout[-2000:]
    assert "those the references were made for (new.safetensors)" in proc.stdout


def test_compact_samples_get_digests_of_the_new_references(tiny_cap_pkg: Built, tmp_path: Path) -> None:  # noqa: F811
    new = _weights("mixed", tmp_path, lambda sd: sd.__setitem__("emb.weight", sd["emb.weight"] * 2))
    out = tmp_path / "rotated.pt2"
    made = run_cli("references", str(tiny_cap_pkg.path), f"{MODELS}:mixed", "--weights", str(new), "-o", str(out))
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    before, after = _manifest(tiny_cap_pkg.path)["golden"], _manifest(out)["golden"]
    assert [c["id"] for c in after["compact_samples"]] == [c["id"] for c in before["compact_samples"]] != []
    assert [d["sum"] for c in after["compact_samples"] for d in c["outputs"]] != [
        d["sum"] for c in before["compact_samples"] for d in c["outputs"]
    ]
    proc, report = probe_json(out, tmp_path, "--weights", str(new))
    assert proc.returncode == 0 and "NOT CHECKED" not in proc.stdout, proc.stdout[-3000:]
    assert "compact: " in " ".join(_golden_phase(report)["detail"]["checked"]), _golden_phase(report)["detail"]


@pytest.mark.parametrize(
    ("factory", "edit", "said"),
    [
        ("nan", lambda sd: sd.__setitem__("lin.bias", sd["lin.bias"] + 1), "the factory's model does not match the package's constants"),
        ("static", lambda sd: sd.__setitem__("lin.weight", sd["lin.weight"][:8]), "constants.shape_mismatch"),
        ("static", lambda sd: None, "are the build's own"),
    ],
    ids=["another-model", "reshaped-weight", "the-build-s-weights"],
)
def test_what_does_not_fit_the_package_is_refused_by_name(
    static_pkg: Built, tmp_path: Path, factory: str, edit: Callable[[dict[str, Any]], None], said: str
) -> None:
    new = _weights("static", tmp_path, edit)
    out = tmp_path / "rotated.pt2"
    proc = run_cli("references", str(static_pkg.path), f"{MODELS}:{factory}", "--weights", str(new), "-o", str(out))
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "hint:" in proc.stderr and not out.exists()
    if factory == "nan":
        assert "lin.weight" in proc.stderr
