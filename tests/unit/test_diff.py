"""runtime_probe.diff over manifests that differ in one thing each (fake packages, no torch):
each difference is named in its section, as ``item: A -> B``, and nothing else is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.diff import diff_packages, render_diff
from runtime_probe.errors import UsageError
from tests.schemas import validate

from .fakepkg import make_package


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
            ("golden", "sample max", None, "batch=64"),
        ),
        (lambda m: m["target"].update(march="x86-64-v3"), ("target", "-march", None, "x86-64-v3")),
        (lambda m: m["toolchain"].update(torch="2.14.0"), ("toolchain", "torch", "2.13.0", "2.14.0")),
        (_constant, ("constants", "constant lin.weight", None, "float32 (4, 4) package")),
    ],
)
def test_one_difference_is_named(tmp_path: Path, edit: Callable[[dict[str, Any]], Any], expected: tuple[str, ...]) -> None:
    assert _pair(tmp_path, edit) == [expected]


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
