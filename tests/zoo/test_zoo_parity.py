"""Issue 12's CI subset: public architectures from torchvision, timm and transformers (small
configs, random weights) built, probed and guard-loaded through zoo.parity's own code, the command
lines a user runs (``aoti-guard build zoo/models.py:NAME``, ``aoti-guard probe``) and the guarded
loader in a child where transformers, timm and torchvision cannot be imported.

The whole zoo, with the bare path beside it, is ``python -m zoo.parity`` (docs/zoo.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_dir

from .conftest import require_zoo_libraries

pytestmark = [pytest.mark.zoo, pytest.mark.integration]

# the fastest small models across the three libraries and the shapes that broke aoti-guard:
# a ModelOutput (bert), nested ModelOutputs (clip), a DynamicCache in and out with a derived mask
# length past + 1 (gpt2_cache), image sides 32*k with a batch Inductor narrows (resnet18), 16*k (timm_vit_tiny)
MODELS = ["bert", "gpt2_cache", "clip", "resnet18", "vit_b_16", "timm_vit_tiny", "timm_deit_tiny", "distilbert"]
LIBRARIES = {"transformers", "timm", "torchvision"}


class ZooRuns:
    """zoo.parity's result for one model, run when a test first asks for it, once per test run:
    under pytest-xdist the workers share the folder, and the first to ask runs the model under a
    file lock (the 8 models spread over the workers instead of one fixture running them all)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __getitem__(self, name: str) -> dict[str, Any]:
        from filelock import FileLock

        from zoo import parity

        record = self.folder / f"{name}.json"
        with FileLock(str(self.folder / f"{name}.lock")):
            if not record.exists():
                (result,) = parity.run_parity(
                    [name], size="small", device="cpu", out_dir=str(self.folder / name), timeout=900, jobs=1, bare=False
                )
                record.write_text(json.dumps(result))
            return json.loads(record.read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> ZooRuns:
    require_zoo_libraries()
    from zoo import models

    assert {models.entry(n).library for n in MODELS} == LIBRARIES
    return ZooRuns(shared_dir(tmp_path_factory, "zoo"))


def _why(r: dict[str, Any], step: str) -> str:
    s = r.get(step) or {}
    return f"{r['name']} {step}: {s.get('error')} (codes {s.get('codes')})"


@pytest.mark.parametrize("name", MODELS)
def test_builds_probes_and_guard_loads(zoo: ZooRuns, name: str) -> None:
    r = zoo[name]
    assert r["build"]["ok"], _why(r, "build")
    assert r["build"]["exit_code"] == 0
    assert r["probe"]["ok"] and r["probe"]["verdict"] == "passed", _why(r, "probe")
    assert r["probe"]["golden_runs"] == len(r["build"]["samples"])
    assert r["guard"]["ok"], _why(r, "guard")
    assert r["guard"]["samples"] == len(r["build"]["samples"])
    assert r["guard"]["imported"] == []  # the loading process never imported a model library
    # every free symbol taken to its min and max by a golden sample
    assert r["build"]["full_coverage"], r["build"]["symbols"]
    assert r["build"]["max_abs_vs_eager"] is not None and r["build"]["max_abs_vs_fp64"] is not None
    # the debug twin ran at build time on the release model's weights (it has none of its own on
    # CPU) and printed its kernels; a twin that did not get them crashes or fails its load
    twin = r["build"]["twin"]
    assert twin is not None and twin["weights"] == "release" and twin["kernels"] > 0, twin
    assert twin["max_abs_vs_release"] is not None and twin["max_abs_vs_release"] <= 1e-4, twin
    assert "build.twin_failed" not in r["build"]["codes"]


def test_bert_model_output_through_the_guarded_loader_without_transformers(zoo: ZooRuns) -> None:
    g = zoo["bert"]["guard"]
    assert g["ok"], g.get("error")
    assert "transformers" in g["import_refused"] and g["imported"] == []
    assert g["output_type"] == "runtime_probe.guard.load.NamedOutputs"
    assert g["leaf_names"] == ["last_hidden_state", "pooler_output"]


def test_nested_model_outputs_keep_their_leaf_names(zoo: ZooRuns) -> None:
    g = zoo["clip"]["guard"]
    assert g["ok"], g.get("error")
    assert "text_model_output.pooler_output" in g["leaf_names"] and "vision_model_output.pooler_output" in g["leaf_names"]


def test_dynamic_cache_in_and_out_by_leaf_names(zoo: ZooRuns) -> None:
    r = zoo["gpt2_cache"]
    assert r["guard"]["ok"], r["guard"].get("error")
    assert "past_key_values.key_cache.0" in r["guard"]["leaf_names"]
    # past is free, the mask's length past + 1 derived: past sampled at 1 and at its max
    symbols = r["build"]["symbols"]
    assert set(symbols) == {"batch", "past"} or len(symbols) == 2, symbols
    for sym in symbols.values():
        assert sym["at_min"] and sym["at_max"], symbols
        assert sym["min"] in sym["tested"] and sym["max"] in sym["tested"]
    assert {"min", "max"} <= set(r["build"]["samples"])


def test_derived_image_sides_are_sampled_at_their_bounds(zoo: ZooRuns) -> None:
    r = zoo["resnet18"]
    symbols = r["build"]["symbols"]
    # H, W = 32*k: the free symbols are the k's (2..8) and the batch
    assert len(symbols) == 3, symbols
    for name, sym in symbols.items():
        assert sym["min"] in sym["tested"] and sym["max"] in sym["tested"], name
    assert {s["max"] for n, s in symbols.items() if n != "batch"} == {8}
    # Inductor narrows a CPU convolution's batch 1..16 to 1..15: never silently
    if symbols["batch"]["max"] != 16:
        assert "build.range_narrowed" in r["build"]["codes"]


def test_the_readme_venv_imports_the_model_libraries(tmp_path: Path) -> None:
    """Issue 27: in the venv scripts/setup.sh makes (CPU torch, the index's CUDA torchvision) a
    user's own factory imports transformers, timm and torchvision models, in a plain process that
    never imported zoo/ (no ensure_torchvision_importable): the venv's start-up shim does it."""
    import subprocess
    import sys

    code = (
        "from transformers import DistilBertConfig, DistilBertForSequenceClassification\n"
        "import timm, torchvision.models\n"
        "print(type(DistilBertForSequenceClassification(DistilBertConfig(n_layers=1, dim=32, hidden_dim=64, n_heads=2))).__name__,"
        " type(timm.create_model('resnet18')).__name__, type(torchvision.models.resnet18()).__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["DistilBertForSequenceClassification", "ResNet", "ResNet"], proc.stdout


def test_probe_shapes_pads_distilberts_mask_and_spans_its_vocabulary(zoo: ZooRuns, tmp_path: Path) -> None:
    """``probe --shapes`` on a real transformers package: the attention mask it makes is padded on
    the right, on the left and not at all, row by row, and the ids reach both ends of the
    vocabulary the build recorded (runtime_probe/golden/recipe.py), as the build's golden samples
    are made; the example's values resampled (before) gave an all-ones mask."""
    import subprocess
    import sys

    from safetensors.torch import load_file

    r = zoo["distilbert"]
    assert r["build"]["ok"] and r["build"]["package"], _why(r, "build")
    saved = tmp_path / "saved"
    proc = subprocess.run(
        [sys.executable, "-m", "runtime_probe", r["build"]["package"], "--fast", "--shapes", "input_ids:6x24", "--save-inputs", str(saved)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    inputs = load_file(str(saved / "shapes.inputs.safetensors"))
    mask, ids = inputs["attention_mask"], inputs["input_ids"]
    assert tuple(mask.shape) == (6, 24) and tuple(ids.shape) == (6, 24)
    assert mask[0, 0] == 1 and mask[0, -1] == 0  # padded on the right
    assert mask[1, 0] == 0 and mask[1, -1] == 1  # on the left
    assert bool((mask[2] == 1).all())  # not at all
    assert int(ids.min()) == 0 and int(ids.max()) == 999  # the small config's vocabulary: 1000 rows (zoo/models.py)
