"""Issue 43: weights from the files users have. A transformers Qwen2 (tied embeddings, a rotary
``inv_freq`` buffer no checkpoint holds) built with aoti-guard; its ``state_dict()`` saved with
safetensors, ``safetensors.torch.save_model`` and ``save_pretrained`` files are taken as they are by
``probe --weights`` and the guarded loader, and a reshaped, retyped, extra or missing tensor is
refused by name. Before, every one of these files was refused (``constants.missing:
'model.rotary_emb.inv_freq'``, and ``'lm_head.weight'`` for save_pretrained).

Issue 42 on the same model built without its weights: the guarded loader refuses every call by
name until the weights are given, never a segfault; the build warns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_dir
from tests.integration.conftest import Built, build_package, once, run_probe

from .conftest import require_zoo_libraries

pytestmark = [pytest.mark.zoo, pytest.mark.integration]

HERE = Path(__file__).parent
TARGET = f"{HERE / 'checkpoint_models.py'}:qwen2_tied"


def _build(tmp_path_factory: pytest.TempPathFactory, name: str, *extra: str) -> Built:
    require_zoo_libraries()
    folder = shared_dir(tmp_path_factory, "packages")
    built: Built = once(folder, name, lambda: build_package(folder, name, TARGET, "--no-debug-twin", *extra))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return built


@pytest.fixture(scope="module")
def qwen_pkg(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _build(tmp_path_factory, "qwen2_tied")


@pytest.fixture(scope="module")
def qwen_noweights_pkg(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _build(tmp_path_factory, "qwen2_tied_noweights", "--inductor-config", "aot_inductor.package_constants_in_so=false")


def _model() -> Any:
    sys.path.insert(0, str(HERE))
    try:
        import checkpoint_models
    finally:
        sys.path.pop(0)
    return checkpoint_models


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The build's weights as users save them: state_dict() (safetensors refuses shared tensors:
    cloned), safetensors' save_model (keeps one name of a tied pair) and save_pretrained (drops
    lm_head.weight)."""
    require_zoo_libraries()
    from safetensors.torch import save_file, save_model

    folder = tmp_path_factory.mktemp("checkpoints")
    model = _model().model()
    out = {"state_dict": folder / "state_dict.safetensors", "save_model": folder / "save_model.safetensors"}
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}, str(out["state_dict"]))
    save_model(model, str(out["save_model"]))
    model.save_pretrained(str(folder / "pretrained"))
    out["save_pretrained"] = folder / "pretrained" / "model.safetensors"
    return out


def _probe(pkg: Path, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    report = tmp_path / f"report-{len(list(tmp_path.iterdir()))}.json"
    proc = run_probe(str(pkg), "--json", str(report), *args)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    return proc, json.loads(report.read_text())


def _constants(report: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in report["phases"] if p["name"] == "constants")


def _tensor_names(path: Path) -> set[str]:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return set(f.keys())


@pytest.mark.parametrize("kind", ["state_dict", "save_model", "save_pretrained"])
def test_checkpoint_files_are_taken_as_they_are(qwen_pkg: Built, files: dict[str, Path], tmp_path: Path, kind: str) -> None:
    held = _tensor_names(files[kind])
    assert "model.rotary_emb.inv_freq" not in held
    proc, report = _probe(qwen_pkg.path, tmp_path, "--weights", str(files[kind]))
    assert proc.returncode == 0, proc.stdout[-3000:]
    constants = _constants(report)
    assert constants["status"] == "passed" and constants["detail"]["weights"]["same_as_build"] is True
    (note,) = [f for f in constants["findings"] if f["code"] == "constants.from_package"]
    assert note["evidence"]["kept"] == ["model.rotary_emb.inv_freq"]
    if "lm_head.weight" not in held:  # the tied copy save_pretrained drops comes from its other name
        assert note["evidence"]["tied"] == {"lm_head.weight": "model.embed_tokens.weight"}
    golden = next(p for p in report["phases"] if p["name"] == "golden")
    assert golden["status"] == "passed" and golden["detail"]["compared"] is True  # the build's bytes: references apply


def _edit_state_dict(tmp_path: Path, edit: Callable[[dict[str, Any], Any], None]) -> Path:
    import torch
    from safetensors.torch import save_file

    sd = {k: v.detach().clone().contiguous() for k, v in _model().model().state_dict().items()}
    edit(sd, torch)
    path = tmp_path / "edited.safetensors"
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    return path


DOWN = "model.layers.0.mlp.down_proj.weight"


@pytest.mark.parametrize(
    ("edit", "code", "name"),
    [
        (lambda sd, torch: sd.__setitem__(DOWN, sd[DOWN].t()), "constants.shape_mismatch", DOWN),
        (
            lambda sd, torch: sd.__setitem__("model.norm.weight", sd["model.norm.weight"].bfloat16()),
            "constants.dtype_mismatch",
            "model.norm.weight",
        ),
        (
            lambda sd, torch: sd.__setitem__("model.layers.1.mlp.up_proj.weight", torch.zeros(64, 32)),
            "constants.unexpected",
            "model.layers.1.mlp.up_proj.weight",
        ),
        (lambda sd, torch: sd.pop("model.layers.0.self_attn.q_proj.bias"), "constants.missing", "model.layers.0.self_attn.q_proj.bias"),
        (lambda sd, torch: sd.__setitem__("lm_head.weight", sd["lm_head.weight"] * 2), "constants.tied_mismatch", "lm_head.weight"),
    ],
    ids=["reshaped", "retyped", "extra", "missing", "untied"],
)
def test_a_changed_checkpoint_is_refused_by_name(qwen_pkg: Built, tmp_path: Path, edit: Any, code: str, name: str) -> None:
    proc, report = _probe(qwen_pkg.path, tmp_path, "--weights", str(_edit_state_dict(tmp_path, edit)))
    assert proc.returncode == 1, proc.stdout[-3000:]
    refused = [(f["code"], f["evidence"].get("constant")) for f in _constants(report)["findings"] if f["severity"] == "error"]
    assert refused == [(code, name)]
    assert next(p for p in report["phases"] if p["name"] == "golden")["status"] == "skipped"


def test_new_weights_pass_with_a_plain_not_checked_line(qwen_pkg: Built, tmp_path: Path) -> None:
    """A new checkpoint runs and is checked for NaN/Inf only: the text report says so under PASSED."""
    path = _edit_state_dict(tmp_path, lambda sd, torch: sd.__setitem__("model.norm.weight", sd["model.norm.weight"] * 1.5))
    proc = run_probe(str(qwen_pkg.path), "--weights", str(path))
    assert proc.returncode == 0, proc.stdout[-3000:]
    verdict = proc.stdout.splitlines().index(next(ln for ln in proc.stdout.splitlines() if ln.startswith("PASSED")))
    below = "\n".join(proc.stdout.splitlines()[verdict + 1 :])
    assert "NOT CHECKED: the weights differ from the build's" in below and "aoti-guard references" in below


def test_the_guarded_loader_takes_the_checkpoints(qwen_pkg: Built, files: dict[str, Path]) -> None:
    import torch

    from runtime_probe import load

    models = _model()
    model, ids = models.model(), models.example_ids()
    guarded = load(qwen_pkg.path, weights=files["save_pretrained"])
    with torch.no_grad():
        expected = model(input_ids=ids).logits
        torch.manual_seed(7)
        for p in model.parameters():
            p.normal_(0, 0.05)
        retrained = model(input_ids=ids).logits
    torch.testing.assert_close(guarded(input_ids=ids).logits, expected)
    guarded.load_constants(model.state_dict())  # the live module's own map: tied, inv_freq absent
    torch.testing.assert_close(guarded(input_ids=ids).logits, retrained)


def test_a_package_without_weights_warns_at_build_and_takes_a_checkpoint(
    qwen_noweights_pkg: Built, files: dict[str, Path], tmp_path: Path
) -> None:
    """The build says the package has no weights and how to give them; the rotary buffer, which no
    checkpoint holds, travels in the package, so a save_pretrained file completes it."""
    assert qwen_noweights_pkg.report is not None
    warned = [f for p in qwen_noweights_pkg.report["phases"] for f in p["findings"] if f["code"] == "build.no_packaged_weights"]
    assert len(warned) == 1 and warned[0]["severity"] == "warning" and "weights=" in warned[0]["hint"]
    assert "model.rotary_emb.inv_freq" in warned[0]["message"]
    proc, report = _probe(qwen_noweights_pkg.path, tmp_path, "--weights", str(files["save_pretrained"]))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert _constants(report)["detail"]["weights"]["same_as_build"] is True


_GUARDED_CHILD = """
import sys, torch
sys.path.insert(0, sys.argv[2])
import checkpoint_models as m
from runtime_probe import load
from runtime_probe.reporting.errors import ConstantsContractError
model, ids = m.model(), m.example_ids()
guarded = load(sys.argv[1])
try:
    guarded(input_ids=ids)
    print("CALLED")
except ConstantsContractError as exc:
    print("REFUSED", exc.code, exc.constant)
guarded.load_constants(model.state_dict())
with torch.no_grad():
    torch.testing.assert_close(guarded(input_ids=ids).logits, model(input_ids=ids).logits)
print("OK")
"""


def test_the_guarded_loader_refuses_calls_until_the_weights_are_given(qwen_noweights_pkg: Built) -> None:
    """Issue 42: the call reads unset memory in a bare load (SIGSEGV, exit 139); here it raises by
    name until load_constants (a state_dict() map as it is) has set every constant. In a child: a
    segfault there is this test failing, not the test run dying."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", _GUARDED_CHILD, str(qwen_noweights_pkg.path), str(HERE)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.split() == ["REFUSED", "constants.missing", "lm_head.weight", "OK"]


def test_a_retrained_save_pretrained_checkpoint_is_validated_through_new_references(qwen_pkg: Built, tmp_path: Path) -> None:
    """Issue 43: a rotation to a retrained checkpoint (save_pretrained: no inv_freq, no tied
    lm_head copy) gets references of its own (aoti-guard references), and the probe compares."""
    import torch

    from tests.integration.conftest import run_cli

    model = _model().model()
    torch.manual_seed(11)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.0 + 0.05 * torch.rand_like(p))
    model.save_pretrained(str(tmp_path / "retrained"))
    new = tmp_path / "retrained" / "model.safetensors"
    assert "lm_head.weight" not in _tensor_names(new) and "model.rotary_emb.inv_freq" not in _tensor_names(new)
    out = tmp_path / "rotated.pt2"
    made = run_cli("references", str(qwen_pkg.path), TARGET, "--weights", str(new), "-o", str(out))
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-3000:]
    proc, report = _probe(out, tmp_path, "--weights", str(new))
    assert proc.returncode == 0 and "NOT CHECKED" not in proc.stdout, proc.stdout[-3000:]
    assert next(p for p in report["phases"] if p["name"] == "golden")["detail"]["compared"] is True
