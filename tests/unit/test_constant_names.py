"""Pairing the program's constants with the package's names by value (builder/compile/constant_names.py)."""

from __future__ import annotations

from typing import Any

from aoti_guard.builder.compile.constant_names import pair_renamed


def _d(sha: str, shape: tuple[int, ...] = (12,), dtype: str = "float32") -> dict[str, Any]:
    return {"sha256": sha, "dtype": dtype, "shape": list(shape)}


def _with_offset() -> Any:
    """An exported program with a plain tensor attribute: ``offset`` to export, renamed by Inductor."""
    import torch

    class WithOffset(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.offset = torch.full((4,), 0.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.offset

    return torch.export.export(WithOffset(), (torch.randn(2, 4),))


def test_nothing_is_hashed_when_every_package_name_is_the_programs() -> None:
    def never(*_: Any) -> Any:
        raise AssertionError("hashed without need")

    names = pair_renamed(["lin.weight", "offset"], ["lin.weight"], never, never)  # offset inlined: no leftover in the package
    assert (names.renamed, names.unpaired, names.ambiguous) == ({}, {}, [])


def test_a_renamed_constant_is_paired_by_its_bytes_not_its_shape() -> None:
    program = {"w": _d("a"), "offset": _d("b"), "scale": _d("c")}  # offset and scale: same dtype and shape
    package = {"_tensor_constant0": _d("c"), "_tensor_constant1": _d("b")}
    asked: list[list[str]] = []

    def read(names: list[str]) -> dict[str, Any]:
        asked.append(names)
        return {n: package[n] for n in names}

    names = pair_renamed(sorted(program), ["w", *package], program.__getitem__, read)
    assert names.renamed == {"offset": "_tensor_constant1", "scale": "_tensor_constant0"}
    assert asked == [["_tensor_constant0", "_tensor_constant1"]]  # only the package's leftovers are read
    assert names.unpaired == {} and names.ambiguous == []


def test_same_bytes_twice_is_left_unpaired_rather_than_guessed() -> None:
    program = {"zeros_a": _d("z"), "zeros_b": _d("z")}
    package = {"_tensor_constant0": _d("z"), "_tensor_constant1": _d("z")}
    names = pair_renamed(sorted(program), list(package), program.__getitem__, lambda ns: {n: package[n] for n in ns})
    assert names.renamed == {} and names.ambiguous == ["zeros_a", "zeros_b"]
    assert set(names.unpaired) == set(package)  # the manifest still lists what the package holds


def test_a_package_constant_no_program_value_matches_is_kept_under_its_own_name() -> None:
    program = {"offset": _d("b")}
    package = {"_tensor_constant0": _d("b", shape=(3, 4))}  # same bytes, another shape: not the same tensor
    names = pair_renamed(["offset"], list(package), program.__getitem__, lambda ns: {n: package[n] for n in ns})
    assert names.renamed == {} and names.unpaired == package


def test_the_manifest_records_both_names_and_every_package_constant() -> None:

    from aoti_guard.builder.export.contract import extract_constants

    ep = _with_offset()
    runtime = {"_tensor_constant0": "_tensor_constant0", "_extra": "_extra"}
    specs = extract_constants(
        ep, runtime, {"offset": "_tensor_constant0"}, {"_extra": {"sha256": "e", "dtype": "float16", "shape": [2, 3], "nbytes": 12}}
    )
    by_fqn = {c.fqn: c for c in specs}
    assert by_fqn["offset"].loaded_name == "_tensor_constant0" and by_fqn["offset"].storage == "package"
    assert (by_fqn["_extra"].nbytes, by_fqn["_extra"].runtime_fqn, by_fqn["_extra"].loaded_name) == (12, None, "_extra")
    unnamed = extract_constants(ep, runtime)  # what every build recorded before: the program's name, "inlined"
    assert unnamed[0].storage == "inlined" and unnamed[0].runtime_fqn is None


def test_a_failed_read_of_the_packages_values_is_a_warning_naming_the_constants(tmp_path: Any) -> None:
    """The validation child could not read the compiled model's values: the build says which
    names stay unpaired and what a probe will then report, and goes on."""

    from aoti_guard.builder.validate import run as validate_run
    from aoti_guard.builder.validate.child_run import ChildRun
    from runtime_probe.child.worker import ChildFailure
    from runtime_probe.package.manifest import IOContract

    class _Worker:
        def request(self, op: str, timeout: float, **args: Any) -> Any:
            assert op == "constant_digests" and args["names"] == ["_tensor_constant0"]
            raise ChildFailure("constant_digests", "", "the runner failed", 0.1, returncode=1)

    ep = _with_offset()
    run = ChildRun(_Worker(), "g.safetensors", [], IOContract((), (), (), ()), "cpu", None, str(tmp_path), 5.0)  # type: ignore[arg-type]
    names, findings = validate_run._constant_names(run, ep, "release.pt2", ["_tensor_constant0"])
    assert names.renamed == {} and [(f.code, f.severity.value) for f in findings] == [("build.constants_unnamed", "warning")]
    assert "_tensor_constant0" in findings[0].message


def test_a_manifest_that_lists_two_constants_under_one_loaded_name_is_refused(tmp_path: Any) -> None:
    """A lying manifest: a renamed constant given another constant's package name would hide one of
    the package's constants from the probe's check and from --weights."""
    from runtime_probe.package.archive import open_archive
    from runtime_probe.package.manifest import parse_manifest
    from runtime_probe.package.manifest_rules import check_manifest
    from runtime_probe.runtime import layout
    from tests.unit.fakepkg import make_package

    def constant(fqn: str, runtime_fqn: str | None) -> dict[str, Any]:
        return {"fqn": fqn, "kind": "constant", "dtype": "float32", "shape": [4], "sha256": "ab" * 32, "nbytes": 16,
                "storage": "package", "runtime_fqn": runtime_fqn}  # fmt: skip

    def messages(runtime_fqn: str) -> list[str]:
        path = make_package(
            tmp_path / f"{runtime_fqn}.pt2", edit=lambda m: m.update(constants=[constant("table", None), constant("offset", runtime_fqn)])
        )
        archive, _ = open_archive(str(path))
        assert archive is not None
        with archive:
            m = parse_manifest(archive.read(layout.MANIFEST, max_bytes=1 << 20))
            return [f.message for f in check_manifest(m, archive)]

    assert any("two constants the loaded model would know as 'table'" in msg for msg in messages("table"))
    assert not any("two constants" in msg for msg in messages("_tensor_constant0"))
