"""Options of ``build --reference/--keep-onnx/--minify`` are checked before any slow work."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.pipeline import check_options
from runtime_probe.reporting.errors import ToolError, UsageError


def _options(tmp_path: Path, **kw: Any) -> BuildOptions:
    return BuildOptions(output=str(tmp_path / "m.pt2"), **kw)


def test_keep_onnx_needs_the_reference(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--reference onnxruntime"):
        check_options(_options(tmp_path, keep_onnx=str(tmp_path / "m.onnx")))


def test_keep_onnx_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        check_options(_options(tmp_path, reference="onnxruntime", keep_onnx=str(tmp_path / "nope" / "m.onnx")))
    with pytest.raises(UsageError, match="is a folder"):
        check_options(_options(tmp_path, reference="onnxruntime", keep_onnx=str(tmp_path)))
    check_options(_options(tmp_path, reference="onnxruntime", keep_onnx=str(tmp_path / "m.onnx")))


def test_output_folder_is_created(tmp_path: Path) -> None:
    out = tmp_path / "new" / "deeper" / "m.pt2"
    check_options(BuildOptions(output=str(out)))
    assert out.parent.is_dir() and not out.exists()  # the folder, before any slow work; not the package
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot create the output folder"):
        check_options(BuildOptions(output=str(blocker / "m.pt2")))


def test_unknown_reference_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown reference"):
        check_options(_options(tmp_path, reference="tensorrt"))


def test_missing_onnxruntime_is_a_tool_error_with_the_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(ToolError, match="onnxruntime") as info:
        check_options(_options(tmp_path, reference="onnxruntime"))
    assert info.value.exit_code == 3 and "aoti-guard[onnx]" in (info.value.hint or "")


def test_minify_refuses_a_foreign_folder(tmp_path: Path) -> None:
    (tmp_path / "m.minify").mkdir()
    (tmp_path / "m.minify" / "mine.txt").write_text("x")
    with pytest.raises(UsageError, match="not made by aoti-guard"):
        check_options(_options(tmp_path, minify=True))
    check_options(_options(tmp_path, minify=False))
