"""torch.export's refusals, with hints built from its own message, and the round trip: following the
hint (the ``--dynamic`` flags its evidence gives, through the CLI) builds a package whose contract
accepts exactly the sizes asked.

The cases, each a tiny real model (tests/integration/export_hint_models.py, models.py:groups8):
a multiple of 8 (asked 8..64: today's template hint gave ``8*_seq:1..64``, a package of 8..512), a
sequence range beyond a position table, an example batch of 1, and a Hugging Face decoder exported
as it comes (a DynamicCache in its output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.export import Dim

from aoti_guard.builder.export import export_program
from aoti_guard.spec import BuildSpec
from runtime_probe.recorder import StepFailed

from .conftest import HERE, MODELS, build_package, run_cli

pytestmark = pytest.mark.integration

HINTS = HERE / "export_hint_models.py"


def _refusal(report: dict[str, Any] | None) -> dict[str, Any]:
    assert report is not None
    (finding,) = [f for p in report["phases"] for f in p["findings"] if f["code"] == "build.export_failed"]
    return finding


def _hinted_flags(finding: dict[str, Any]) -> list[str]:
    """The flags the hint gives (its evidence holds them for scripts; the text says the same)."""
    flags = list(finding["evidence"]["dynamic_flags"])
    assert "Build with: " + " ".join(f"--dynamic {f}" for f in flags) in finding["hint"]
    return [arg for f in flags for arg in ("--dynamic", f)]


def _io(path: Path) -> dict[str, Any]:
    inspected = run_cli("inspect", "--json", str(path))
    assert inspected.returncode == 0, inspected.stdout + inspected.stderr
    io: dict[str, Any] = json.loads(inspected.stdout)["manifest"]["io"]
    return io


def test_a_multiple_of_8_hint_builds_the_asked_range_not_eight_times_it(pkg_dir: Path) -> None:
    refused = build_package(pkg_dir, "hint_groups8", f"{MODELS}:groups8", "--no-debug-twin", "--dynamic", "x:1=seq:8..64")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    finding = _refusal(refused.report)
    assert finding["evidence"]["dynamic_flags"] == ["x:1=8*_seq:1..8"]
    assert "x:1 (seq): you asked 8..64; the model takes 8..64 in steps of 8" in finding["hint"]
    assert "_seq = Dim('_seq', min=1, max=8); dynamic_shapes = {'x': {1: 8 * _seq}}" in finding["hint"]
    # torch's message, line by line in the text report (it was one line of \x0a escapes)
    assert "\\x0a" not in refused.stdout
    out = refused.stdout.splitlines()
    assert any(line.endswith("| Suggested fixes:") for line in out) and any(line.endswith("|   seq = 8*_seq") for line in out)

    built = build_package(pkg_dir, "hint_groups8_followed", f"{MODELS}:groups8", "--no-debug-twin", *_hinted_flags(finding))
    assert built.returncode == 0, built.stdout + built.stderr
    io = _io(built.path)
    assert io["symbols"] == [{"name": "_seq", "min": 1, "max": 8, "sources": []}]
    assert io["inputs"][0]["tensor"]["shape"][1] == {"expr": "8*_seq", "min": 8, "max": 64}  # 8..64 as asked, not 8..512


def test_a_range_beyond_the_position_table_hint_narrows_it(pkg_dir: Path) -> None:
    asked = ("--dynamic", "ids:0=batch:1..4", "--dynamic", "ids:1=seq:1..512")
    refused = build_package(pkg_dir, "hint_positions", f"{HINTS}:position_table", "--no-debug-twin", *asked)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    finding = _refusal(refused.report)
    assert "torch.export suggests: seq = Dim('seq', max=128)." in finding["hint"]
    assert "ids:1 (seq): you asked 1..512; the model takes 1..128" in finding["hint"]
    assert finding["evidence"]["dynamic_flags"] == ["ids:0=batch:1..4", "ids:1=seq:1..128"]  # the other dim kept as asked

    built = build_package(pkg_dir, "hint_positions_followed", f"{HINTS}:position_table", "--no-debug-twin", *_hinted_flags(finding))
    assert built.returncode == 0, built.stdout + built.stderr
    symbols = {s["name"]: (s["min"], s["max"]) for s in _io(built.path)["symbols"]}
    assert symbols == {"batch": (1, 4), "seq": (1, 128)}


def test_a_batch_of_one_hint_asks_for_an_example_of_two(pkg_dir: Path) -> None:
    refused = build_package(pkg_dir, "hint_batch1", f"{HINTS}:batch_of_one", "--no-debug-twin", "--dynamic", "x:0=batch:1..64")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    finding = _refusal(refused.report)
    assert "The example's x has size 1 at dim 0 (batch)" in finding["hint"]
    assert "give an example with x.shape[0] >= 2 (e.g. 2)" in finding["hint"]
    assert "8*_seq" not in finding["hint"]

    # the fix is the example: the same model and flags with a batch of 2 build the asked 1..64
    built = build_package(pkg_dir, "hint_batch2", f"{HINTS}:batch_of_two", "--no-debug-twin", *_hinted_flags(finding))
    assert built.returncode == 0, built.stdout + built.stderr
    io = _io(built.path)
    assert io["symbols"] == [{"name": "batch", "min": 1, "max": 64, "sources": ["x.shape[0]"]}]


def test_a_hugging_face_decoder_with_its_cache_gets_the_cache_recipe(pkg_dir: Path) -> None:
    refused = build_package(pkg_dir, "hint_llama_cache", f"{HINTS}:llama_as_it_comes", "--no-debug-twin")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    finding = _refusal(refused.report)
    assert "transformers.cache_utils.DynamicCache" in finding["found"]  # torch's own words
    hint = finding["hint"]
    assert "transformers.integrations.executorch.register_dynamic_cache_export_support()" in hint
    assert "use_cache=False in the factory's kwargs" in hint

    built = build_package(pkg_dir, "hint_llama_no_cache", f"{HINTS}:llama_without_cache", "--no-debug-twin")
    assert built.returncode == 0, built.stdout + built.stderr
    assert [o["name"] for o in _io(built.path)["outputs"]] == ["logits"]


def test_a_factorys_dynamic_shapes_get_the_fix_in_code_and_the_code_exports() -> None:
    """No compile: the hint for dynamic_shapes given by a factory leads with the code, and that code
    is what torch.export takes."""
    import sys

    sys.path.insert(0, str(HERE))
    try:
        from models import Groups8  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    x = torch.randn(2, 32)
    spec = BuildSpec(Groups8(), (x,), {}, {"x": {1: Dim("seq", min=8, max=64)}})
    with pytest.raises(StepFailed) as stop:
        export_program(spec, spec.dynamic_shapes)
    (finding,) = stop.value.findings
    hint = finding.hint or ""
    code = "_seq = Dim('_seq', min=1, max=8); dynamic_shapes = {'x': {1: 8 * _seq}}"
    assert f"In the factory's dynamic_shapes: {code} (or drop them and build with --dynamic x:1=8*_seq:1..8)" in hint
    scope: dict[str, Any] = {"Dim": Dim}
    exec(code, scope)  # the code as the hint gives it
    ep = torch.export.export(Groups8(), (x,), dynamic_shapes=scope["dynamic_shapes"])
    assert ep.module()(torch.randn(2, 64)).shape == (2, 8)
