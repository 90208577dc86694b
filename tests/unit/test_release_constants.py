"""runtime_probe.package.release_constants on packages that cannot give a twin its weights: an
error that says why, never a twin left without constants."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from runtime_probe.package.release_constants import ReleaseConstantsError, release_so, share_release_constants


class _Twin:
    def __init__(self) -> None:
        self.loaded: object = None

    def load_constants(self, constants: object, *, check_full_update: bool) -> None:
        self.loaded = constants


def _package(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(f"pkg/{name}", data)
    return path


def test_a_package_without_the_release_so_is_an_error(tmp_path: Path) -> None:
    pkg = _package(tmp_path / "p.pt2", {"data/aotinductor/model/m.wrapper.cpp": b"//", "archive_format": b"pt2"})
    twin = _Twin()
    with pytest.raises(ReleaseConstantsError, match=r"no release \.so"):
        share_release_constants(twin, str(pkg), "model", "cpu", None)
    assert twin.loaded is None


def test_an_so_that_is_not_a_model_is_an_error(tmp_path: Path) -> None:
    pkg = _package(tmp_path / "p.pt2", {"data/aotinductor/model/m.wrapper.so": b"\x7fELF not really", "archive_format": b"pt2"})
    twin = _Twin()
    with pytest.raises(ReleaseConstantsError, match="could not be read"):
        share_release_constants(twin, str(pkg), "model", "cpu", None)
    assert twin.loaded is None


def test_the_wrapper_so_is_chosen_and_nested_libraries_are_not(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path / "p.pt2",
        {
            "data/aotinductor/model/a.kernel.so": b"k",
            "data/aotinductor/model/b.wrapper.so": b"w",
            "data/aotinductor/model/sub/c.wrapper.so": b"nested",
        },
    )
    out = tmp_path / "out"
    out.mkdir()
    path = release_so(str(pkg), "model", str(out))
    assert Path(path).name == "b.wrapper.so" and Path(path).read_bytes() == b"w"


def test_an_unreadable_package_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ReleaseConstantsError, match="cannot be read"):
        release_so(str(bad), "model", str(tmp_path))


def test_the_model_library_is_the_wrapper_so_else_the_first_so() -> None:
    from runtime_probe.runtime import layout

    assert layout.model_library(["m/a.kernel.so", "m/b.wrapper.so", "m/c.cpp"]) == "m/b.wrapper.so"
    assert layout.model_library(["m/a.cpp", "m/k.so", "m/z.so"]) == "m/k.so"
    assert layout.model_library(["m/a.cpp", "m/a.cubin"]) is None
