"""``--dynamic`` with derived sizes, and torch.export's suggested fixes carried into the hint."""

from __future__ import annotations

import pytest
import torch

from aoti_guard.builder.export.program import export_hint, suggested_fixes
from aoti_guard.builder.resolve.dynamic import DynamicDim, dynamic_shapes_from_flags, parse_dynamic
from runtime_probe.reporting.errors import UsageError


def test_plain_and_derived_flags_parse() -> None:
    dims = parse_dynamic(["ids:0=batch:1..8", "ids:1=8*seq8:1..64", "labels:1=seq8+1", "mask:1=2*seq8+3"])
    assert dims[0] == DynamicDim("ids", 0, "batch", 1, 8)
    assert dims[1] == DynamicDim("ids", 1, "seq8", 1, 64, 8, 0)
    # the range given once holds for every use of the name
    assert dims[2] == DynamicDim("labels", 1, "seq8", 1, 64, 1, 1)
    assert dims[3] == DynamicDim("mask", 1, "seq8", 1, 64, 2, 3)
    assert (dims[0].mul, dims[0].add) == (1, 0)


@pytest.mark.parametrize("flag", ["ids:1=0*seq:1..4", "ids:1=8*:1..4", "ids:1=seq-1", "ids:1=8x*seq", "ids:1=seq*8"])
def test_bad_derived_flags_are_usage_errors(flag: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_dynamic([flag])
    assert "--dynamic" in str(err.value) and err.value.hint


def test_derived_flags_become_derived_dims() -> None:
    ids, labels = torch.zeros(2, 16, dtype=torch.long), torch.zeros(2, 17)
    shapes = dynamic_shapes_from_flags(parse_dynamic(["ids:1=8*seq8:1..64", "labels:1=8*seq8+1"]), {"ids": ids, "labels": labels})
    seq, seq_plus = shapes["ids"][1], shapes["labels"][1]
    assert seq.root.__name__ == "seq8" and (seq.root.min, seq.root.max) == (1, 64)
    assert seq.fn(3) == 24 and seq_plus.fn(3) == 25
    assert seq_plus.root is seq.root  # one free symbol, two sizes derived from it


_TORCH_ERROR = """Constraints violated (seq)! For more information, run with TORCH_LOGS="+dynamic".
  - Not all values of seq = L['x'].size()[1] in the specified range seq <= 512 satisfy the generated guard (L['x'].size()[1] // 8) != 0.
Suggested fixes:
  _seq = Dim('_seq', min=1, max=64)
  seq = 8*_seq

The error above occurred when calling torch.export.export."""


def test_suggested_fixes_are_read_from_torchs_message() -> None:
    assert suggested_fixes(_TORCH_ERROR) == ["_seq = Dim('_seq', min=1, max=64)", "seq = 8*_seq"]
    assert suggested_fixes("Constraints violated (seq)! no suggestion here") == []


def test_the_hint_carries_the_suggestion_and_the_cli_form() -> None:
    class UserError(Exception):
        pass

    hint = export_hint(UserError(_TORCH_ERROR))
    assert "seq = 8*_seq" in hint and "_seq = Dim('_seq', min=1, max=64)" in hint
    assert "--dynamic x:1=8*_seq:1..64" in hint  # the input torch's line names, with torch's own range for _seq
    bare = export_hint(UserError("Constraints violated (seq)! For more information"))
    assert "narrow the Dim range" in bare
