"""A sequence range past the model's config.max_position_embeddings is a build warning naming both
numbers (aoti_guard/builder/export/positions.py; issue 44: a RoPE decoder built for 1..1024 against 256
passed without a word). The whole build of such a model: tests/integration/test_export_hints.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from aoti_guard.builder.export.positions import beyond_positions
from runtime_probe.package.manifest import Dim, InputSpec, IOContract, TensorSpec


def _contract(**shapes: tuple[Any, ...]) -> IOContract:
    inputs = tuple(
        InputSpec(name, name, "tensor", i, TensorSpec("int64", shape, tuple(1 for _ in shape), True, "cpu"))
        for i, (name, shape) in enumerate(shapes.items())
    )
    return IOContract(params=(), inputs=inputs, outputs=(), symbols=())


def _model(limit: Any) -> Any:
    return SimpleNamespace(config=SimpleNamespace(max_position_embeddings=limit))


def test_a_sequence_range_past_the_configs_positions_is_a_warning_naming_both_numbers() -> None:
    seq = Dim("seq", 1, 1024)
    (finding,) = beyond_positions(_model(256), _contract(input_ids=(Dim("batch", 1, 8), seq), attention_mask=(Dim("batch", 1, 8), seq)))
    assert finding.code == "build.positions_exceeded" and finding.severity.value == "warning" and finding.phase == "export"
    assert "sequences up to 1024 (input_ids:1), past the 256 positions" in finding.message
    assert finding.expected == "input_ids:1 at most 256" and finding.found == "input_ids:1 up to 1024"
    assert finding.hint is not None and finding.hint.startswith("narrow the range to at most 256 (--dynamic input_ids:1=seq:1..256)")
    assert finding.evidence == {"max_position_embeddings": 256, "input": "input_ids:1", "largest": 1024}


def test_the_mask_that_covers_a_cache_counts_and_no_maximum_is_past_any_limit() -> None:
    ids = (Dim("batch", 1, 8), 1)
    (cached,) = beyond_positions(_model(64), _contract(input_ids=ids, attention_mask=(Dim("batch", 1, 8), Dim("past + 1", 2, 80))))
    assert cached.found == "attention_mask:1 up to 80" and "stays at most 64" in (cached.hint or "")
    (open_ended,) = beyond_positions(_model(64), _contract(input_ids=(1, Dim("seq", 1, None))))
    assert open_ended.found == "input_ids:1 with no maximum"


def test_within_the_limit_or_without_a_config_nothing_is_said() -> None:
    within = _contract(input_ids=(Dim("batch", 1, 8), Dim("seq", 1, 256)))
    assert beyond_positions(_model(256), within) == []
    assert beyond_positions(SimpleNamespace(), within) == [] and beyond_positions(_model(None), within) == []
    assert beyond_positions(_model(True), within) == []  # not a number of positions
    assert beyond_positions(_model(16), _contract(pixel_values=(1, 3, 224, 224))) == []  # not a sequence input
