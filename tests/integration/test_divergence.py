"""The build names the true cause of a wrong package: state, chance, an export guard, or the
compiler, with the stage table as evidence (issue: "The true cause of a wrong package").

Each model is built once through the CLI (module fixtures); the assertions read the JSON report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Built, build_package

pytestmark = pytest.mark.integration

MODELS = Path(__file__).parent / "models_divergence.py"


def _findings(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for p in report["phases"] for f in p["findings"] if f["code"] == code]


def _phase(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["phases"] if p["name"] == name)


def _blames_compiler(report: dict[str, Any]) -> list[str]:
    """Every finding text that names the compiler as the cause."""
    texts = []
    for p in report["phases"]:
        for f in p["findings"]:
            text = f"{f['message']} {f.get('hint') or ''}".lower()
            if "compiler problem" in text or "inductor bug" in text or "first stage that departs is inductor" in text:
                texts.append(text)
    return texts


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    out = tmp_path_factory.mktemp("divergence")
    cases = {
        "dropout_train": [],
        "dropout_eval": [],
        "noisy": [],
        "counter": [],
        "big_sum": ["--atol", "0", "--rtol", "0", "--no-fp64"],
        "branch": [],
    }
    return {name: build_package(out, name, f"{MODELS}:{name}", "--no-debug-twin", *extra) for name, extra in cases.items()}


def test_dropout_left_in_training_mode_is_one_error_at_resolve(built: dict[str, Built]) -> None:
    """Issue 44: the first and only error says model.eval(); nothing exports, compiles or validates."""
    b = built["dropout_train"]
    assert b.returncode == 1 and b.report is not None, b.stdout + b.stderr
    errors = [f for p in b.report["phases"] for f in p["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in errors] == ["build.training_mode"], b.stdout[-4000:]
    [tm] = errors
    assert tm["phase"] == "resolve" and "model.eval()" in tm["hint"]
    assert tm["evidence"]["modules"] == ["drop (Dropout, p=0.5)"]
    assert [p["status"] for p in b.report["phases"] if p["name"] in ("export", "compile", "validate")] == ["skipped"] * 3
    assert not _blames_compiler(b.report)


def test_the_same_model_in_eval_mode_builds_clean(built: dict[str, Built]) -> None:
    b = built["dropout_eval"]
    assert b.returncode == 0, b.stdout + b.stderr
    assert b.report is not None
    assert not _findings(b.report, "build.nondeterministic") and not _findings(b.report, "build.first_divergence")
    # the text summary shows the margin per output, so no one has to open the JSON
    assert "margin output: worst |compiled - eager|" in b.stdout
    [margin] = _phase(b.report, "validate")["detail"]["margins"]
    assert margin["output"] == "output" and margin["verdict"] == "pass" and 0.0 <= margin["tolerance_used"] <= 1.0


def test_a_random_op_in_forward_is_named(built: dict[str, Built]) -> None:
    b = built["noisy"]
    assert b.returncode == 1 and b.report is not None
    [nd] = _findings(b.report, "build.nondeterministic")
    assert "aten.rand_like.default" in nd["message"]
    assert [r["training"] for r in nd["evidence"]["random_ops"]] == [False]
    assert not _blames_compiler(b.report)


def test_a_buffer_mutated_in_place_is_named(built: dict[str, Built]) -> None:
    """On every torch: the build is refused for the buffer written in place, named."""
    b = built["counter"]
    assert b.returncode == 1 and b.report is not None
    [st] = _findings(b.report, "build.stateful_model")
    assert st["evidence"]["mutated_buffers"] == ["count"] and st["severity"] == "error"
    assert "the state is the package's, not the caller's" in st["hint"]
    assert not _blames_compiler(b.report)


def test_a_buffer_mutated_in_place_makes_eager_depart_first(built: dict[str, Built]) -> None:
    """Where the package starts every call from its built-in state (torch 2.13: 4, 4, 4) and eager
    carries it (4, 5, 6), validation fails and the stage table says eager departed first."""
    b = built["counter"]
    assert b.returncode == 1 and b.report is not None
    [stage] = [f for f in _findings(b.report, "build.first_divergence") if f["severity"] == "error"]
    assert stage["evidence"]["first"] == "eager"
    assert "`count`" in stage["message"] and "not the cause" in stage["message"]
    eager = next(r for r in stage["evidence"]["stages"] if r["stage"] == "eager")
    assert eager["status"] == "departs" and eager["max_abs"] > 0
    assert not _blames_compiler(b.report)


def test_an_export_guard_is_the_first_stage_that_departs(built: dict[str, Built]) -> None:
    b = built["branch"]
    assert b.returncode == 1 and b.report is not None
    stage = next(f for f in _findings(b.report, "build.first_divergence") if f["severity"] == "error")
    assert stage["evidence"]["first"] == "export"
    export = next(r for r in stage["evidence"]["stages"] if r["stage"] == "export")
    assert export["status"] == "raised" and "Guard failed" in export["note"]
    package = next(r for r in stage["evidence"]["stages"] if r["stage"] == "package")
    assert package["status"] == "departs" and package["max_abs"] > 0.5  # the traced branch, silently
    assert "does not enforce" in stage["message"]
    assert not _blames_compiler(b.report)
    assert "stages (rerun on the failing sample" in b.stdout


def test_inductors_own_arithmetic_is_named_with_a_standalone_repro(built: dict[str, Built], tmp_path: Path) -> None:
    b = built["big_sum"]
    assert b.returncode == 1 and b.report is not None
    stage = next(f for f in _findings(b.report, "build.first_divergence") if f["severity"] == "error")
    rows = {r["stage"]: r for r in stage["evidence"]["stages"]}
    assert [rows[s]["status"] for s in ("eager", "export", "decompose")] == ["agrees"] * 3
    assert rows["inductor"]["status"] == "departs" and rows["package"]["status"] == "departs"
    assert stage["evidence"]["first"] == "inductor"
    repro = Path(stage["evidence"]["repro"])
    assert repro.name == "repro.py" and (repro.parent / "program.pt2").exists() and (repro.parent / "inputs.pt").exists()
    text = repro.read_text()
    assert "aoti_guard" not in text.replace("aoti-guard", "") and "runtime_probe" not in text
    # plain torch, nothing of aoti-guard importable, run from elsewhere: the difference reproduces
    blocked = (
        "import sys, runpy; sys.modules['aoti_guard'] = None; sys.modules['runtime_probe'] = None; "
        f"sys.argv = ['repro.py']; runpy.run_path({str(repro)!r}, run_name='__main__')"
    )
    scratch = tmp_path / "tmp"  # the repro's TMPDIR: it made a package there and left it, on every run
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    proc = subprocess.run([sys.executable, "-I", "-c", blocked], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "aoti: max |aoti - exported program|" in proc.stdout and "DIFFERS" in proc.stdout
    assert not list(scratch.rglob("repro.pt2")), "the repro left its package in the temp dir"
    # the compiler's stage: the minifier ran by itself (no --minify) and said what it made of it
    minify = _phase(b.report, "minify")
    assert minify["status"] != "skipped"
    assert {f["code"] for f in minify["findings"]} & {"build.minified", "build.minifier_failed"}


def test_the_minifier_does_not_run_for_a_cause_before_the_compiler(built: dict[str, Built]) -> None:
    for name in ("counter", "branch", "dropout_train"):
        report = built[name].report
        assert report is not None
        assert not [p for p in report["phases"] if p["name"] == "minify"], name


def test_distilbert_left_in_training_mode_is_refused_with_its_dropouts_named(tmp_path: Path) -> None:
    """A real transformers model from its config, without .eval(): today's main built it with
    ``atol 0.185`` and every probe passed."""
    factory = tmp_path / "distil.py"
    factory.write_text(
        "import sys, torch\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})  # the repo's zoo/, not installed\n"
        "from zoo.models import ensure_torchvision_importable\n"
        "ensure_torchvision_importable()\n"
        "from transformers import DistilBertConfig, DistilBertForSequenceClassification\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    cfg = DistilBertConfig(dim=32, n_layers=1, n_heads=2, hidden_dim=64, vocab_size=200, max_position_embeddings=64)\n"
        "    model = DistilBertForSequenceClassification(cfg)  # no .eval(): training mode, as built from a config\n"
        "    ids = torch.randint(0, 200, (2, 16))\n"
        "    return model, (), {'input_ids': ids, 'attention_mask': torch.ones_like(ids)}\n"
    )
    b = build_package(tmp_path, "distil", f"{factory}:make", "--no-debug-twin")
    assert b.returncode == 1 and b.report is not None, b.stdout + b.stderr
    errors = [f for p in b.report["phases"] for f in p["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in errors] == ["build.training_mode"], b.stdout[-4000:]
    modules = errors[0]["evidence"]["modules"]
    assert "distilbert.embeddings.dropout (Dropout, p=0.1)" in modules and "dropout (Dropout, p=0.2)" in modules
    assert "model.eval()" in errors[0]["hint"]
    # the hint followed once: the same factory with .eval() builds
    following = factory.read_text().replace("(cfg)  # no .eval(): training mode, as built from a config", "(cfg).eval()  # the hint")
    assert following != factory.read_text()
    factory.write_text(following)
    fixed = build_package(tmp_path, "distil_eval", f"{factory}:make", "--no-debug-twin")
    assert fixed.returncode == 0, fixed.stdout[-4000:] + fixed.stderr[-2000:]
    assert not (tmp_path / "distil.pt2").exists()


def test_the_stage_table_reads_in_the_json_report(built: dict[str, Built]) -> None:
    report = built["branch"].report  # wrong on every torch: the package ignores export's guard
    assert report is not None
    stages = _phase(report, "validate")["detail"]["stages"]
    assert [r["stage"] for r in stages] == ["eager", "export", "decompose", "inductor", "package"]
    json.dumps(stages)  # plain data
