"""``--dynamic`` with derived sizes, and torch.export's suggested fixes carried into the hint."""

from __future__ import annotations

from pathlib import Path

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


def _calls_of(name: str) -> list[str]:
    """Where product code calls ``name``: one "path:line" per call."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = []
    for path in sorted([*root.joinpath("aoti_guard").rglob("*.py"), *root.joinpath("runtime_probe").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if callee == name:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_dynamic_text_is_parsed_in_one_place() -> None:
    """The command line and a library caller give text; BuildOptions parses it once, and every
    step reads the typed dims (check_options and the resolve step each parsed it before)."""
    assert [where.split(":")[0] for where in _calls_of("parse_dynamic")] == ["aoti_guard/builder/options.py"]


def test_a_bad_spec_gives_one_error_from_the_command_line_and_the_library(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aoti_guard.builder.options import BuildOptions
    from aoti_guard.cli import main

    bad = ("x:0=batch:1..8", "mask:0=batch:2..8")  # one name, two ranges
    with pytest.raises(UsageError) as parsed:
        parse_dynamic(bad)
    with pytest.raises(UsageError) as library:
        BuildOptions(output=str(tmp_path / "m.pt2"), dynamic=bad)  # type: ignore[arg-type]
    assert (str(library.value), library.value.hint) == (str(parsed.value), parsed.value.hint)
    assert main(["build", "-o", str(tmp_path / "m.pt2"), "--dynamic", bad[0], "--dynamic", bad[1]]) == 2
    err = capsys.readouterr().err
    assert f"error: {parsed.value}" in err and str(parsed.value.hint) in err
    assert not (tmp_path / "m.pt2").exists()


def test_build_options_hold_the_typed_dims() -> None:
    from dataclasses import replace

    from aoti_guard.builder.options import BuildOptions

    texts = ("ids:0=batch:1..8", "ids:1=8*seq8:1..64", "labels:1=seq8+1", "mask:1=2*seq8+3", "x:-1=n:4..")
    options = BuildOptions(output="m.pt2", dynamic=texts)  # type: ignore[arg-type]
    assert options.dynamic == tuple(parse_dynamic(texts))
    assert [d.text for d in options.dynamic] == [
        "ids:0=batch:1..8",
        "ids:1=8*seq8:1..64",
        "labels:1=seq8+1:1..64",
        "mask:1=2*seq8+3:1..64",
        "x:-1=n:4..",
    ]
    assert replace(options, device="cpu").dynamic == options.dynamic  # typed dims pass through unchanged
    mixed = BuildOptions(output="m.pt2", dynamic=(options.dynamic[0], "ids:1=seq:1..4"))  # type: ignore[arg-type]
    assert mixed.dynamic == tuple(parse_dynamic(["ids:0=batch:1..8", "ids:1=seq:1..4"]))
