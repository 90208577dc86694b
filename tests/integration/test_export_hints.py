"""torch.export's refusals, with hints built from its own message, and the round trip: following the
hint (the ``--dynamic`` flags its evidence gives, through the CLI) builds a package whose contract
accepts exactly the sizes asked.

The cases, each a tiny real model (tests/integration/export_hint_models.py, models.py:groups8):
a multiple of 8 (asked 8..64: today's template hint gave ``8*_seq:1..64``, a package of 8..512), a
sequence range beyond a position table, an example batch of 1, a Hugging Face decoder exported
as it comes (a DynamicCache in its output), a padding mask left static beside declared
``input_ids`` (a two-op model, and a tiny Mistral), and an example outside the declared range."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.export import Dim

from aoti_guard.builder.export.hints import Tie
from aoti_guard.builder.export.program import export_program
from aoti_guard.builder.resolve.binding import bind
from aoti_guard.spec import BuildSpec
from runtime_probe.reporting.recorder import StepFailed

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
    assert io["symbols"] == [{"name": "_seq", "min": 1, "max": 8, "sources": [], "value_of": None}]
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
    assert io["symbols"] == [{"name": "batch", "min": 1, "max": 64, "sources": ["x.shape[0]"], "value_of": None}]


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
        export_program(spec, spec.dynamic_shapes, bind(spec.model, spec.args, spec.kwargs))
    (finding,) = stop.value.findings
    hint = finding.hint or ""
    code = "_seq = Dim('_seq', min=1, max=8); dynamic_shapes = {'x': {1: 8 * _seq}}"
    assert f"In the factory's dynamic_shapes: {code} (or drop them and build with --dynamic x:1=8*_seq:1..8)" in hint
    scope: dict[str, Any] = {"Dim": Dim}
    exec(code, scope)  # the code as the hint gives it
    ep = torch.export.export(Groups8(), (x,), dynamic_shapes=scope["dynamic_shapes"])
    assert ep.module()(torch.randn(2, 64)).shape == (2, 8)


MASK_ASKED = ("--dynamic", "input_ids:0=batch:1..8", "--dynamic", "input_ids:1=seq:1..128")


def _symbols(path: Path) -> dict[str, tuple[int, int | None]]:
    return {s["name"]: (s["min"], s["max"]) for s in _io(path)["symbols"]}


def test_a_mask_left_static_is_named_with_the_flag_to_add_and_following_it_builds_the_asked_ranges(pkg_dir: Path) -> None:
    """Issue 44, item 3: the hint said the code fixes input_ids:1 to 16 and to make it static."""
    refused = build_package(pkg_dir, "hint_mask_static", f"{HINTS}:masked_tokens", "--no-debug-twin", *MASK_ASKED)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    finding = _refusal(refused.report)
    hint = finding["hint"]
    for dim, symbol, size in ((0, "batch", 2), (1, "seq", 16)):
        assert (
            f"torch.export pins input_ids:{dim} ({symbol}) to {size} because the model's code ties it to attention_mask:{dim} "
            f"({size} in the example), which you left static: declare it with the same symbol, --dynamic attention_mask:{dim}={symbol}."
        ) in hint
    assert "static (no --dynamic for it)" not in hint and "fixes input_ids" not in hint
    assert finding["evidence"]["dynamic_flags"] == [
        "input_ids:0=batch:1..8",
        "input_ids:1=seq:1..128",
        "attention_mask:0=batch",
        "attention_mask:1=seq",
    ]

    built = build_package(pkg_dir, "hint_mask_static_followed", f"{HINTS}:masked_tokens", "--no-debug-twin", *_hinted_flags(finding))
    assert built.returncode == 0, built.stdout + built.stderr
    assert _symbols(built.path) == {"batch": (1, 8), "seq": (1, 128)}
    mask = next(i for i in _io(built.path)["inputs"] if i["name"] == "attention_mask")
    assert [d["expr"] for d in mask["tensor"]["shape"]] == ["batch", "seq"]


def test_a_mistral_with_its_mask_left_static_gets_both_mask_dims_and_builds_with_a_positions_warning(pkg_dir: Path) -> None:
    """Issue 44, items 3 and 13, on the real case: a Mistral decoder (rotary positions, 64 of them
    in its config) asked for batch 1..8 x seq 1..128 with its mask left static. torch.export pins
    seq (the mask meets the scores); the mask's batch is indexed, so nothing pins it, and a build
    with only seq added passed export and lost every sample of batch > 2 in validation."""
    refused = build_package(pkg_dir, "hint_mistral_mask", f"{HINTS}:mistral_64_positions", "--no-debug-twin", *MASK_ASKED)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    finding = _refusal(refused.report)
    hint = finding["hint"]
    assert "torch.export pins input_ids:1 (seq) to 16 because the model's code ties it to attention_mask:1 (16 in the example)" in hint
    assert "attention_mask:0 (2 in the example) has batch's example size" in hint
    assert finding["evidence"]["dynamic_flags"] == [
        "input_ids:0=batch:1..8",
        "input_ids:1=seq:1..128",
        "attention_mask:0=batch",
        "attention_mask:1=seq",
    ]

    built = build_package(
        pkg_dir, "hint_mistral_mask_followed", f"{HINTS}:mistral_64_positions", "--no-debug-twin", *_hinted_flags(finding)
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert _symbols(built.path) == {"batch": (1, 8), "seq": (1, 128)}
    assert built.report is not None
    (beyond,) = [f for p in built.report["phases"] for f in p["findings"] if f["code"] == "build.positions_exceeded"]
    assert beyond["severity"] == "warning" and "up to 128" in beyond["message"] and "the 64 positions" in beyond["message"]
    assert "--dynamic input_ids:1=seq:1..64" in beyond["hint"]


def test_an_example_outside_the_declared_range_gets_the_example_and_the_range_that_fix_it(pkg_dir: Path) -> None:
    """Issue 44, item 6: "2 not in range [4, 8]" got "see the torch.export docs"."""
    asked = (
        *("--dynamic", "input_ids:0=batch:4..8", "--dynamic", "input_ids:1=seq:1..8"),
        *("--dynamic", "attention_mask:0=batch", "--dynamic", "attention_mask:1=seq"),
    )
    refused = build_package(pkg_dir, "hint_outside", f"{HINTS}:masked_tokens", "--no-debug-twin", *asked)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    finding = _refusal(refused.report)
    hint = finding["hint"]
    assert "torch.export docs" not in hint
    assert "input_ids:0 (batch): the example's size is 2, outside the range you declared, 4..8" in hint
    assert "give an example inside it: input_ids.shape[1] = 8, attention_mask.shape[1] = 8 (the inputs that share seq)" in hint
    assert "or widen the range to 1..16, which includes the example" in hint
    assert finding["evidence"]["example_sizes"] == {"input_ids:0": 4, "attention_mask:0": 4, "input_ids:1": 8, "attention_mask:1": 8}
    assert finding["evidence"]["dynamic_flags"] == [
        "input_ids:0=batch:2..8",
        "input_ids:1=seq:1..16",
        "attention_mask:0=batch",
        "attention_mask:1=seq",
    ]

    # the fix that keeps the asked ranges: the same flags, the example the hint names
    built = build_package(pkg_dir, "hint_outside_followed", f"{HINTS}:masked_tokens_inside", "--no-debug-twin", *asked)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _symbols(built.path) == {"batch": (4, 8), "seq": (1, 8)}


class _Shifted(torch.nn.Module):
    """``labels`` is one longer than ``ids`` (sliced against it), ``scale`` a table of its own."""

    def forward(self, ids: torch.Tensor, labels: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return (ids + labels[:, 1:]).float().sum() * scale.sum()


def test_find_ties_reads_torchs_own_program_and_leaves_an_unrelated_input_alone() -> None:
    """No compile: the second export (undeclared dims free) gives labels:1 = seq + 1 and labels:0 =
    batch, and nothing for the table of 3, whose size no declared symbol has."""
    from aoti_guard.builder.export.hints import declared_dims
    from aoti_guard.builder.export.ties import find_ties

    model = _Shifted()
    args = (torch.zeros(2, 16, dtype=torch.long), torch.zeros(2, 17, dtype=torch.long), torch.ones(3))
    dynamic = {"ids": {0: Dim("batch", min=1, max=8), 1: Dim("seq", min=1, max=64)}, "labels": None, "scale": None}
    declared = declared_dims(dynamic, {"ids": args[0], "labels": args[1], "scale": args[2]})
    with pytest.raises(Exception, match="specialized it to be a constant"):
        torch.export.export(model, args, dynamic_shapes=dynamic)
    binding = bind(model, args, {})
    ties = find_ties(model, args, {}, dynamic, declared, binding)
    assert sorted(ties, key=lambda t: t.dim) == [Tie("labels", 0, "batch", 1, 0, 2), Tie("labels", 1, "seq", 1, 1, 17)]
    assert find_ties(model, args, {}, dynamic, [], binding) == ()
