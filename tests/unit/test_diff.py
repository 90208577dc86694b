"""runtime_probe.diff over manifests that differ in one thing each (fake packages, no torch):
each difference is named in its section, as ``item: A -> B``, and nothing else is."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.diff import diff_packages, render_diff
from runtime_probe.reporting.errors import UsageError
from tests.schemas import validate

from .fakepkg import make_package, replacing


def _pair(tmp_path: Path, edit: Callable[[dict[str, Any]], Any]) -> list[tuple[str, str, str | None, str | None]]:
    a = make_package(tmp_path / "a.pt2")
    b = make_package(tmp_path / "b.pt2", edit=edit)
    result = diff_packages(str(a), str(b))
    validate("diff", result.to_dict())
    return [(c.section, c.item, c.a, c.b) for c in result.changes]


def test_same_manifest_agrees(tmp_path: Path) -> None:
    a = make_package(tmp_path / "a.pt2")
    result = diff_packages(str(a), str(a))
    assert result.same and result.exit_code == 0
    assert "same: the manifests agree" in render_diff(result)


def _guard(m: dict[str, Any]) -> None:
    m["io"]["guards"] = [{"text": "L['x'].size()[0] % 2 == 0", "expr": "batch % 2 == 0", "words": "batch must be even"}]


def _constant(m: dict[str, Any], sha: str = "ab" * 32, shape: list[int] | None = None) -> None:
    m["constants"] = [
        {
            "fqn": "lin.weight",
            "kind": "parameter",
            "dtype": "float32",
            "shape": shape or [4, 4],
            "sha256": sha,
            "nbytes": 64,
            "storage": "package",
        }
    ]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda m: m["io"]["inputs"][0]["tensor"].update(dtype="float16"), ("contract", "input x dtype", "float32", "float16")),
        (
            lambda m: m["io"]["inputs"][0]["tensor"]["shape"].__setitem__(0, {"expr": "batch", "min": 1, "max": 32}),
            ("contract", "input x dim 0", "batch[1..64]", "batch[1..32]"),
        ),
        (lambda m: m["io"]["symbols"][0].update(max=None), ("contract", "symbol batch range", "[1, 64]", "[1, inf]")),
        (_guard, ("contract", "guard batch % 2 == 0", None, "batch must be even")),
        (lambda m: m["golden"]["tolerances"][0].update(atol=0.185), ("tolerances", "output atol", "1e-05", "0.185")),
        (
            lambda m: m["golden"]["samples"].append({"id": "max", "inputs": {}, "outputs": {}, "symbols": {"batch": 64}}),
            ("golden", "sample max", None, "batch=64 (whole)"),
        ),
        (lambda m: m["target"].update(march="x86-64-v3"), ("target", "-march", None, "x86-64-v3")),
        (lambda m: m["toolchain"].update(torch="2.14.0"), ("toolchain", "torch", "2.13.0", "2.14.0")),
        (_constant, ("constants", "constant lin.weight", None, "float32 (4, 4) package")),
    ],
)
def test_one_difference_is_named(tmp_path: Path, edit: Callable[[dict[str, Any]], Any], expected: tuple[str, ...]) -> None:
    assert _pair(tmp_path, edit) == [expected]


def _compact(m: dict[str, Any], *, seed: int = 7, out_sum: float = 12.5, whole: bool = False) -> None:
    """A ``max`` sample over the cap: its input by recipe, its output by digest (schema 1.5)."""
    recipe = {"input": "x", "kind": "pool", "dtype": "float32", "shape": [64, 4], "stride": [4, 1], "seed": seed,
              "sha256": f"{seed:02d}" * 32, "pool": "pool.x"}  # fmt: skip
    digest = {"output": "output", "dtype": "float32", "shape": [64, 4], "indices": "max.idx", "values": "max.val",
              "nonfinite": 0, "sum": out_sum, "abs_sum": 30.0, "min": -1.0, "max": 1.0}  # fmt: skip
    if whole:
        m["golden"]["samples"].append(
            {"id": "max", "inputs": {"x": "max.in.x"}, "outputs": {"output": "max.out"}, "symbols": {"batch": 64}}
        )
    else:
        m["golden"]["compact_samples"] = [
            {"id": "max", "symbols": {"batch": 64}, "origin": "generated", "inputs": {}, "recipes": [recipe], "outputs": [digest]}
        ]


def test_compact_samples_are_compared_like_whole_ones(tmp_path: Path) -> None:
    """A sample over the cap is one the probe checks: the diff names it, its form, its recipes and
    its output digests (before, it saw only the whole samples and called two packages the same)."""
    (tmp_path / "added").mkdir()
    assert _pair(tmp_path / "added", _compact) == [("golden", "sample max", None, "batch=64 (compact)")]

    def changed(edit: Callable[[dict[str, Any]], Any]) -> list[tuple[str, str | None, str | None]]:
        a = make_package(tmp_path / "c-a.pt2", edit=_compact)
        b = make_package(tmp_path / f"c-{len(list(tmp_path.iterdir()))}.pt2", edit=edit)
        return [(c.item, c.a, c.b) for c in diff_packages(str(a), str(b)).changes]

    assert changed(lambda m: _compact(m, seed=8)) == [
        ("sample max recipe x", "pool float32[64, 4] seed 7 sha256 0707070707070707", "pool float32[64, 4] seed 8 sha256 0808080808080808")
    ]
    [(item, before, after)] = changed(lambda m: _compact(m, out_sum=99.0))
    assert item == "sample max output output" and "sum 12.5" in str(before) and "sum 99.0" in str(after)
    assert changed(lambda m: _compact(m, whole=True)) == [("sample max stored", "compact (recipes and output digests)", "whole")]


def test_constant_values_and_shapes(tmp_path: Path) -> None:
    a = make_package(tmp_path / "a.pt2", edit=_constant)
    b = make_package(tmp_path / "b.pt2", edit=lambda m: _constant(m, sha="cd" * 32))
    c = make_package(tmp_path / "c.pt2", edit=lambda m: _constant(m, shape=[4, 8]))
    assert [(ch.item, ch.a, ch.b) for ch in diff_packages(str(a), str(b)).changes] == [("lin.weight values (sha256)", "ab" * 8, "cd" * 8)]
    assert [(ch.item, ch.a, ch.b) for ch in diff_packages(str(a), str(c)).changes] == [
        ("lin.weight dtype/shape", "float32 (4, 4) package", "float32 (4, 8) package")
    ]


def test_twin_added(tmp_path: Path) -> None:
    def twin(m: dict[str, Any]) -> None:
        m["debug_twin"] = {"model_name": "twin", "entry_prefix": "extra/twin/", "nan_asserts": True, "intermediate_value_printer": "3"}

    assert _pair(tmp_path, twin) == [("twin", "debug twin", "none", "present")]


def test_a_package_without_manifest_is_a_usage_error(tmp_path: Path) -> None:
    a = make_package(tmp_path / "a.pt2")
    plain = tmp_path / "plain.pt2"
    import zipfile

    with zipfile.ZipFile(plain, "w") as zf:
        zf.writestr("model/data/aotinductor/model/x.so", b"\x7fELF")
    with pytest.raises(UsageError, match="has no manifest"):
        diff_packages(str(a), str(plain))
    with pytest.raises(UsageError, match="no such file"):
        diff_packages(str(a), str(tmp_path / "missing.pt2"))


def _checked(atol: float, origin: str) -> Callable[[dict[str, Any]], None]:
    def edit(m: dict[str, Any]) -> None:
        m["schema_version"] = "1.7"
        m["golden"]["tolerances"][0].update(origin="float32 floor", build_check={"atol": atol, "rtol": 1e-4, "origin": origin})

    return edit


def test_the_build_check_is_read_from_each_outputs_tolerance(tmp_path: Path) -> None:
    """Since 1.7 the build check's atol/rtol and origin are recorded once per output
    (``build_check``); the diff names what changed there."""
    a = make_package(tmp_path / "a.pt2", edit=_checked(1e-4, "float32 default"))
    b = make_package(tmp_path / "b.pt2", edit=_checked(0.01, "--atol; rtol: float32 default"))
    changes = [(c.section, c.item, c.a, c.b) for c in diff_packages(str(a), str(b)).changes]
    assert changes == [
        ("tolerances", "output build check atol", "0.0001", "0.01"),
        ("tolerances", "output build check origin", "float32 default", "--atol; rtol: float32 default"),
    ]


def test_an_older_manifests_build_check_comes_from_its_table(tmp_path: Path) -> None:
    def rows(atol: float) -> Callable[[dict[str, Any]], None]:
        return lambda m: m.update(validation={"table": [{"sample": "example", "output": "output", "atol": atol, "rtol": 1e-4}]})

    a = make_package(tmp_path / "a.pt2", edit=rows(1e-4))
    b = make_package(tmp_path / "b.pt2", edit=rows(0.01))
    assert [(c.item, c.a, c.b) for c in diff_packages(str(a), str(b)).changes] == [("output build check atol", "0.0001", "0.01")]


def test_a_manifest_key_with_control_characters_is_cleaned_in_the_error(tmp_path: Path) -> None:
    # issue 40, finding 9: a key the manifest reader quotes in its error reached the terminal raw
    key = "x\x1b[2J\r\u202eFAKE"
    a = make_package(tmp_path / "a.pt2", edit=lambda m: m["hashes"].update({key: 5}))
    with pytest.raises(UsageError) as info:
        diff_packages(str(a), str(a))
    said = str(info.value)
    assert "manifest.hashes.x\\x1b[2J\\x0d\\u202eFAKE" in said, said
    assert all(ch not in said for ch in "\x1b\r\u202e")


def test_a_path_with_control_characters_is_cleaned_in_the_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain\x1b]0;x\x07.pt2"
    make_package(plain, edit=lambda m: m.pop("golden"))
    plain.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: no root folder
    with pytest.raises(UsageError) as info:
        diff_packages(str(plain), str(plain))
    assert "\x1b" not in str(info.value) and "\x07" not in str(info.value) and "plain\\x1b]0;x\\x07.pt2" in str(info.value)


def test_the_sha256_is_of_the_manifest_compared_while_a_writer_replaces_the_file(tmp_path: Path) -> None:
    # issue 40, finding 12: the path was hashed again after parsing, so under an atomic writer
    # 30 of 40 diffs paired one version's sha256 with the other's manifest
    versions = {v: make_package(tmp_path / f"v{v}.pt2", edit=lambda m, v=v: m["tool"].update(version=v)) for v in ("1", "2")}
    digest = {v: hashlib.sha256(p.read_bytes()).hexdigest() for v, p in versions.items()}
    live, fixed = tmp_path / "live.pt2", versions["1"]
    shutil.copyfile(versions["1"], live)
    with replacing(live, list(versions.values())):
        for _ in range(40):
            result = diff_packages(str(live), str(fixed))
            version = "1" if result.same else "2"
            assert result.a["sha256"] == digest[version], "the sha256 of one version beside the other's manifest"


def _impacts(tmp_path: Path, edit: Callable[[dict[str, Any]], Any]) -> list[tuple[str, str]]:
    a = make_package(tmp_path / "a.pt2")
    b = make_package(tmp_path / "b.pt2", edit=edit)
    result = diff_packages(str(a), str(b))
    validate("diff", result.to_dict())
    return [(c.item, c.to_dict()["impact"]) for c in result.changes]


def _set_dim(lo: int, hi: int | None) -> Callable[[dict[str, Any]], None]:
    return lambda m: m["io"]["inputs"][0]["tensor"]["shape"].__setitem__(0, {"expr": "batch", "min": lo, "max": hi})


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # an input's size range narrowed (1..64 -> 1..32): a caller sending 48 now fails
        (_set_dim(1, 32), [("input x dim 0", "breaking")]),
        (_set_dim(1, 128), [("input x dim 0", "compatible")]),
        (lambda m: m["io"]["inputs"][0]["tensor"]["shape"].__setitem__(0, 8), [("input x dim 0", "breaking")]),
        (lambda m: m["io"]["symbols"][0].update(max=32), [("symbol batch range", "breaking")]),
        (lambda m: m["io"]["symbols"][0].update(max=None), [("symbol batch range", "compatible")]),
        (lambda m: m["io"]["inputs"][0]["tensor"].update(dtype="float16"), [("input x dtype", "breaking")]),
        (lambda m: m["io"]["inputs"][0]["tensor"].update(value_range=[0, 9]), [("input x value range", "breaking")]),
        (_guard, [("guard batch % 2 == 0", "breaking")]),
        (lambda m: m["golden"]["tolerances"][0].update(atol=0.185), [("output atol", "compatible")]),
        (lambda m: m["toolchain"].update(torch="2.14.0"), [("torch", "compatible")]),
        (lambda m: m["target"].update(device_type="cuda"), [("device", "breaking")]),
    ],
)
def test_each_change_says_whether_it_breaks_callers(
    tmp_path: Path, edit: Callable[[dict[str, Any]], Any], expected: list[tuple[str, str]]
) -> None:
    assert _impacts(tmp_path, edit) == expected


def test_a_value_range_widened_is_compatible_and_narrowed_breaks(tmp_path: Path) -> None:
    def ranged(hi: int) -> Callable[[dict[str, Any]], None]:
        return lambda m: m["io"]["inputs"][0]["tensor"].update(value_range=[0, hi])

    a = make_package(tmp_path / "a.pt2", edit=ranged(99))
    wider = make_package(tmp_path / "w.pt2", edit=ranged(199))
    narrower = make_package(tmp_path / "n.pt2", edit=ranged(49))
    assert [c.impact for c in diff_packages(str(a), str(wider)).changes] == ["compatible"]
    assert [c.impact for c in diff_packages(str(a), str(narrower)).changes] == ["breaking"]


def test_fail_on_breaking_exits_1_only_for_a_breaking_change(tmp_path: Path) -> None:
    a = make_package(tmp_path / "a.pt2")
    compatible = make_package(tmp_path / "c.pt2", edit=_set_dim(1, 128))
    breaking = make_package(tmp_path / "b.pt2", edit=_set_dim(1, 32))
    # the default keeps the exit codes scripts rely on: 1 for any difference
    assert diff_packages(str(a), str(compatible)).exit_code == 1
    assert diff_packages(str(a), str(compatible), "breaking").exit_code == 0
    result = diff_packages(str(a), str(breaking), "breaking")
    assert result.exit_code == 1
    doc = result.to_dict()
    validate("diff", doc)
    assert (doc["fail_on"], doc["breaking"], doc["changes"][0]["impact"]) == ("breaking", 1, "breaking")
    text = render_diff(result)
    assert "BREAKING batch[1..64] -> batch[1..32]" in text
    assert text.rstrip().endswith("1 breaking for callers")
    assert "all compatible for callers" in render_diff(diff_packages(str(a), str(compatible)))


def test_the_cli_takes_fail_on(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from aoti_guard.cli import cli

    a = make_package(tmp_path / "a.pt2")
    compatible = make_package(tmp_path / "c.pt2", edit=_set_dim(1, 128))
    breaking = make_package(tmp_path / "b.pt2", edit=_set_dim(1, 32))
    runner = CliRunner()
    assert runner.invoke(cli, ["diff", str(a), str(compatible)]).exit_code == 1
    assert runner.invoke(cli, ["diff", str(a), str(compatible), "--fail-on", "breaking"]).exit_code == 0
    out = runner.invoke(cli, ["diff", str(a), str(breaking), "--fail-on", "breaking"])
    assert out.exit_code == 1 and "BREAKING" in out.output


def test_references_made_for_other_weights_are_named(tmp_path: Path) -> None:
    """`aoti-guard references` made B's golden outputs for another checkpoint: the diff says whose,
    and what to give at load (it showed nothing before)."""

    def remade(m: dict[str, Any]) -> None:
        m["golden"]["references"] = {
            "weights": "finetuned.safetensors",
            "model": "make (model.py)",
            "created": "2026-11-27T10:00:00Z",
            "tool": "aoti-guard 0.9.0",
            "base_manifest_sha256": "cd" * 32,
            "base_created": "2026-11-26T10:00:00Z",
        }

    changes = [c for c in _pair(tmp_path, remade) if c[1].startswith("references")]
    assert (
        "golden",
        "references made for",
        "the build's own weights",
        "finetuned.safetensors (give it at load: probe --weights, load(..., weights=))",
    ) in changes
    assert ("golden", "references made by", None, "make (model.py), aoti-guard 0.9.0, 2026-11-27T10:00:00Z") in changes
