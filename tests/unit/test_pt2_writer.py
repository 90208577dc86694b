"""aoti_guard.pt2.writer: the twin's entries are hashed as they are copied (GBs of a second copy
of the weights, not read again), and the hashes are those of the bytes in the package."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from aoti_guard.pt2 import writer
from runtime_probe.package import archive
from runtime_probe.runtime import layout


def _package(path: Path, model: str, files: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for rel, data in files.items():
            zf.writestr(f"pkg/{layout.model_dir(model)}{rel}", data)


def test_copied_twin_hashes_are_the_packaged_bytes(tmp_path: Path) -> None:
    release, twin = tmp_path / "release.pt2", tmp_path / "twin.pt2"
    _package(release, layout.RELEASE_MODEL, {"m.wrapper.so": b"release-so" * 1000, "m.wrapper.cpp": b"// cpp"})
    big = bytes(range(256)) * 20_000  # several of the copy's chunks
    _package(twin, layout.TWIN_MODEL, {"t.wrapper.so": big, "t.wrapper.cpp": b"// twin"})
    known = writer.copy_twin(str(twin), str(release), layout.TWIN_MODEL, layout.TWIN_DIR)
    assert sorted(known) == [f"{layout.TWIN_DIR}t.wrapper.cpp", f"{layout.TWIN_DIR}t.wrapper.so"]
    assert writer.hash_entries(str(release), known=known) == writer.hash_entries(str(release))  # as read back
    assert known[f"{layout.TWIN_DIR}t.wrapper.so"] == writer.sha256_bytes(big)


def test_known_hashes_spare_the_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release, twin = tmp_path / "release.pt2", tmp_path / "twin.pt2"
    _package(release, layout.RELEASE_MODEL, {"m.wrapper.so": b"r" * 100})
    _package(twin, layout.TWIN_MODEL, {"t.wrapper.so": b"t" * 100})
    known = writer.copy_twin(str(twin), str(release), layout.TWIN_MODEL, layout.TWIN_DIR)
    read: list[str] = []
    original = archive.Archive.sha256
    monkeypatch.setattr(archive.Archive, "sha256", lambda self, rel: read.append(rel) or original(self, rel))
    writer.hash_entries(str(release), known=known)
    assert read and not any(rel.startswith(layout.TWIN_DIR) for rel in read)


def test_the_toolchain_reads_the_release_so_through_a_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The release .so holds the weights (4.4 GB for TinyLlama's shape): the build reads its ELF
    tables through an mmap view of the stored entry, not a copy of the whole file in memory."""
    import torch

    from aoti_guard.builder.compile import toolchain
    from aoti_guard.builder.package import assemble
    from runtime_probe.formats.wrapper_cpp import WrapperFacts

    so = Path(torch.__file__).parent / "lib" / "libc10.so"  # a real C++ library: it needs GLIBCXX
    release = tmp_path / "release.pt2"
    _package(release, layout.RELEASE_MODEL, {"m.wrapper.so": so.read_bytes()})
    seen: list[type] = []
    real = toolchain.build_toolchain
    monkeypatch.setattr(toolchain, "build_toolchain", lambda wrapper, data: seen.append(type(data)) or real(wrapper, data))
    tools = assemble._toolchain_of(str(release), f"{layout.model_dir(layout.RELEASE_MODEL)}m.wrapper.so", WrapperFacts())
    assert seen == [memoryview]
    expected = toolchain.so_requirements(so.read_bytes())
    assert expected["glibcxx"] and tools.glibcxx_required == expected["glibcxx"]


def test_entries_hashed_in_the_background_are_the_packaged_bytes(tmp_path: Path) -> None:
    """The release package's entries are hashed while validation runs (EntryHashes): what it hands
    the package phase is what hash_entries reads, for the entries that did not change since."""
    release = tmp_path / "release.pt2"
    weights = bytes(range(256)) * 20_000
    _package(release, layout.RELEASE_MODEL, {"m.wrapper.so": weights, "m.wrapper.cpp": b"// cpp"})
    known = writer.EntryHashes(str(release)).known(str(release))  # waited for before the package phase appends
    writer.append_entries(str(release), [(layout.GOLDEN, b"golden")])
    so = f"{layout.model_dir(layout.RELEASE_MODEL)}m.wrapper.so"
    assert known[so] == writer.sha256_bytes(weights) and layout.GOLDEN not in known
    assert writer.hash_entries(str(release), known=known) == writer.hash_entries(str(release))


def test_an_entry_rewritten_after_the_early_hash_is_hashed_again(tmp_path: Path) -> None:
    release = tmp_path / "release.pt2"
    _package(release, layout.RELEASE_MODEL, {"m.wrapper.so": b"first" * 100, "m.wrapper.cpp": b"// cpp"})
    early = writer.EntryHashes(str(release))
    early.known(str(release))  # the thread is done
    _package(release, layout.RELEASE_MODEL, {"m.wrapper.so": b"other" * 100, "m.wrapper.cpp": b"// cpp"})
    known = early.known(str(release))
    assert f"{layout.model_dir(layout.RELEASE_MODEL)}m.wrapper.so" not in known  # a different CRC: not trusted
    assert writer.hash_entries(str(release), known=known) == writer.hash_entries(str(release))


def test_a_failed_early_hash_costs_time_not_a_wrong_hash(tmp_path: Path) -> None:
    early = writer.EntryHashes(str(tmp_path / "missing.pt2"))
    assert early.known(str(tmp_path / "missing.pt2")) == {} and early.error is not None


def test_the_early_hashes_say_what_they_covered_and_the_wait(tmp_path: Path) -> None:
    release = tmp_path / "release.pt2"
    _package(release, layout.RELEASE_MODEL, {"m.wrapper.so": b"x" * 1000, "m.wrapper.cpp": b"// cpp"})
    early = writer.EntryHashes(str(release))
    early.known(str(release))
    detail = early.detail()
    assert detail["entries"] == 2 and detail["bytes"] == 1006 and isinstance(detail["waited_s"], float)
