"""Issue 40 finding 4: names that become file names go through one rule (runtime_probe/reporting/paths.py).

A golden sample id becomes ``--save-inputs DIR/ID.inputs.safetensors``: one that is not a plain
name is refused with the manifest (``manifest.invalid`` naming it), before anything is written.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.package.manifest import parse_manifest
from runtime_probe.package.sample_ids import id_problems
from runtime_probe.reporting.paths import MAX_NAME, name_in_folder, plain_name, plain_name_problem

from .test_manifest import minimal

REFUSED = {
    "../../x": "path separator",
    "/abs/x": "path separator",
    "sub/dir/x": "path separator",
    "a\\b": "path separator",
    "..": "starts with a dot",
    ".hidden": "starts with a dot",
    "-rf": "starts with a dash",
    "x\ny": "control character",
    "x\x1b[2Jy": "control character",
    "": "is empty",
    "x" * (MAX_NAME + 1): f"at most {MAX_NAME}",
    "caf\u00e9": "letters, digits",
    "a b": "letters, digits",
    "x\u202ey": "control character",  # right-to-left override: not printable
    "x*": "letters, digits",
}


@pytest.mark.parametrize("name", sorted(REFUSED), ids=ascii)
def test_a_name_that_is_not_plain_is_refused_with_its_reason(name: str) -> None:
    why = plain_name_problem(name)
    assert why is not None and REFUSED[name] in why, why


@pytest.mark.parametrize("name", ["example", "min", "s0", "user-req-2", "a..b", "x" * MAX_NAME, "_x", "9.v1"])
def test_a_plain_name_is_taken(name: str) -> None:
    assert plain_name_problem(name) is None


@pytest.mark.parametrize("text", ["../../etc/passwd", "-rf *", ".bashrc", "caf\u00e9 \u202e", "", "...", "x" * 500])
def test_a_derived_name_always_passes_the_rule(text: str) -> None:
    name = plain_name(text, "fallback", limit=40)
    assert plain_name_problem(name) is None and len(name) <= 40


def test_a_derived_name_keeps_what_it_can() -> None:
    assert plain_name("my req!.v2", "f") == "my_req_.v2"
    assert plain_name("../../x", "f") == "x"
    assert plain_name("///", "f") == "f"


def test_name_in_folder_never_leaves_the_folder(tmp_path: Path) -> None:
    assert name_in_folder(str(tmp_path), "example", prefix="cuda0.", suffix=".inputs.safetensors") == os.path.join(
        str(tmp_path), "cuda0.example.inputs.safetensors"
    )
    for bad in ("../x", "/abs", "a/b", ".."):
        with pytest.raises(ValueError, match="file name"):
            name_in_folder(str(tmp_path), bad)


def _golden_with_ids(*ids: str) -> Any:
    m = copy.deepcopy(minimal())
    m["golden"]["samples"] = [{"id": i, "inputs": {"x": f"s{n}.in.x"}, "outputs": {}} for n, i in enumerate(ids)]
    golden = parse_manifest(json.dumps(m).encode()).golden
    assert golden is not None
    return golden


def test_the_manifest_refuses_sample_ids_that_are_not_plain_reserved_or_repeated() -> None:
    problems = list(id_problems(_golden_with_ids("example", "../../x", "inputs", "max", "max", "sub/dir/x")))
    assert len(problems) == 4, problems
    assert "'../../x', which holds a path separator" in problems[0]
    assert "the probe's own --inputs run" in problems[1]
    assert "two golden samples 'max'" in problems[2]
    assert "'sub/dir/x'" in problems[3]
    assert list(id_problems(_golden_with_ids("example", "min", "max", "mid", "user-req"))) == []


def test_check_manifest_names_the_id_as_manifest_invalid(tmp_path: Path) -> None:
    from runtime_probe.package.archive import open_archive
    from runtime_probe.trust.check import check_archive

    from .fakepkg import make_package

    def edit(m: dict[str, Any]) -> None:
        m["golden"]["samples"][0]["id"] = "../../x"

    archive, findings = open_archive(str(make_package(tmp_path / "p.pt2", edit=edit)))
    assert archive is not None and not findings
    with archive:
        trust = check_archive(archive)
    invalid = [f for f in trust.findings if f.code == "manifest.invalid"]
    assert len(invalid) == 1 and "'../../x'" in invalid[0].message, trust.findings


def test_a_user_sample_file_stem_becomes_a_plain_unreserved_id() -> None:
    from aoti_guard.builder.export.user_samples import _sample_id

    taken: set[str] = {"example"}
    assert _sample_id("/data/-req.safetensors", 0, taken) == "req"
    assert _sample_id("/data/.inputs.safetensors", 1, taken) == "user-inputs"
    assert _sample_id("/data/caf\u00e9 \u202e.safetensors", 2, taken) == "caf"
    for i, source in enumerate(["/d/../x.safetensors", "/d/\n.safetensors", "/d/shapes.safetensors"]):
        assert plain_name_problem(_sample_id(source, i, taken)) is None
