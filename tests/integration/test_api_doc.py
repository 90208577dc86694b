"""docs/api.md runs: its python blocks, in order, in one namespace, in an empty folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.M | re.S)


def test_the_api_doc_has_examples_of_the_three_entry_points() -> None:
    text = "\n".join(blocks())
    for call in ("build(spec", 'probe("scale.pt2"', "runtime_probe.load("):
        assert call in text


def test_every_api_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "api_doc"}
    for i, code in enumerate(blocks()):
        exec(compile(code, f"{DOC.name} block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    # the values the comments promise
    assert re.search(r"^0 .*scale\.pt2$", out, flags=re.M)
    assert "['archive.hash_mismatch']" in out and "input.range x" in out and "(16, 8)" in out
    assert os.path.exists(tmp_path / "scale.pt2")
