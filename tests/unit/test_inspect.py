"""runtime_probe.inspect on hostile packages: the file read once (its sha256 is that of the bytes
parsed), a bad number a problem and not a crash (issue 40, findings 7 and 12)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from runtime_probe.inspect import inspect_package, render_inspection
from runtime_probe.package.archive import open_archive

from .fakepkg import ENTRIES, make_package, manifest_dict, replacing


def test_the_sha256_is_of_the_bytes_parsed_while_a_writer_replaces_the_file(tmp_path: Path) -> None:
    # the path was hashed again after parsing: 18 of 40 runs paired one version's sha256 with
    # the other's manifest under an atomic writer
    # many entries: reading the directory takes long enough for the writer to come in between
    entries = {**ENTRIES, **{f"data/extra/{i}.bin": b"%d" % i for i in range(1000)}}
    versions = {
        v: make_package(tmp_path / f"v{v}.pt2", entries=entries, edit=lambda m, v=v: m["tool"].update(version=v)) for v in ("1", "2")
    }
    digest = {v: hashlib.sha256(p.read_bytes()).hexdigest() for v, p in versions.items()}
    size = {v: p.stat().st_size for v, p in versions.items()}
    live = tmp_path / "live.pt2"
    shutil.copyfile(versions["1"], live)
    with replacing(live, list(versions.values())):
        for _ in range(30):
            data = inspect_package(str(live))
            version = data["manifest"]["tool"]["version"]
            assert (data["sha256"], data["bytes"]) == (digest[version], size[version]), "one version's sha256, the other's manifest"


def test_an_entry_view_reads_the_file_that_was_opened_not_the_path(tmp_path: Path) -> None:
    first = make_package(tmp_path / "a.pt2", entries={"data/aotinductor/model/x.so": b"\x7fELF first"})
    second = make_package(tmp_path / "b.pt2", entries={"data/aotinductor/model/x.so": b"\x7fELF other"})
    archive, _ = open_archive(first)
    assert archive is not None
    with archive:
        shutil.copyfile(second, tmp_path / "b2.pt2")
        (tmp_path / "b2.pt2").replace(first)  # the path now names another file
        assert bytes(archive.view("data/aotinductor/model/x.so")) == b"\x7fELF first"


def test_a_401_digit_tolerance_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    m = manifest_dict(dict(ENTRIES))
    m["golden"]["tolerances"][0]["atol"] = "@@"
    pkg = make_package(tmp_path / "m.pt2", manifest_bytes=json.dumps(m).replace('"@@"', "1" + "0" * 400).encode())
    data = inspect_package(str(pkg))  # was: OverflowError from float()
    problems = [p for p in data["problems"] if p["code"] == "manifest.invalid"]
    assert problems and "golden.tolerances[0].atol" in problems[0]["message"] and "beyond float64" in problems[0]["message"]
    assert "manifest" not in data
    assert "PROBLEM  manifest.invalid" in render_inspection(data)


def test_an_inputs_recorded_value_range_is_shown(tmp_path: Path) -> None:
    """The range the guarded loader enforces on an index input is in the text and the JSON (issue 44)."""
    pkg = make_package(tmp_path / "a.pt2", edit=lambda m: m["io"]["inputs"][0]["tensor"].update(dtype="int64", value_range=[0, 99]))
    data = inspect_package(str(pkg))
    assert data["manifest"]["io"]["inputs"][0]["tensor"]["value_range"] == [0, 99]
    line = next(x for x in render_inspection(data).splitlines() if x.startswith("  x "))
    assert line.endswith("values in [0, 99]"), line
    plain = inspect_package(str(make_package(tmp_path / "b.pt2")))
    assert "values in" not in render_inspection(plain)
