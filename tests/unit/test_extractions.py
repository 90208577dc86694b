"""runtime_probe/child/extractions.py: a child names where its package was extracted (its memory
map), and what a dead child left there is removed, never what a live process still maps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runtime_probe.child.extractions import extraction_roots, extractions_of, in_use, remove_leftover_extractions

MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 123 /usr/bin/python3.11
7f00aa000000-7f00aa100000 r-xp 00000000 fd:01 456 /tmp/K75w7J/m/data/aotinductor/model/cxyz.so
7f00aa200000-7f00aa300000 r-xp 00000000 fd:01 457 /run/probe-1/tmp/aotinductor_Ab12Cd/example/data/aotinductor/debug_twin/cabc.so (deleted)
7f00aa400000-7f00aa500000 r-xp 00000000 fd:01 459 /srv/unpacked/data/aotinductor/model/cdef.so
7f00ab000000-7f00ab100000 rw-p 00000000 00:00 0
7f00ac000000-7f00ac100000 r--p 00000000 fd:01 458 /opt/venv/lib/libtorch_cpu.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
"""


def test_the_extraction_folders_are_read_from_a_memory_map() -> None:
    # the folder the loader made (2.11's /tmp/XXXXXX, 2.13's TMPDIR/aotinductor_XXXXXX) around the
    # archive's folder; a package without one; a deleted file's suffix dropped
    assert extraction_roots(MAPS) == ["/run/probe-1/tmp/aotinductor_Ab12Cd", "/srv/unpacked", "/tmp/K75w7J"]
    assert extraction_roots("") == [] and extraction_roots("garbage\n1 2\n") == []


def _extraction(root: Path) -> Path:
    so = root / "m" / "data" / "aotinductor" / "model" / "c0ffee.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(b"\0" * 4096)
    return so


MAPPER = """
import mmap, sys
from runtime_probe.child.extractions import own_extraction_roots
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
print(own_extraction_roots(), flush=True)
sys.stdin.read()
"""


def test_a_folder_a_live_process_maps_is_kept_and_removed_once_it_is_gone(tmp_path: Path) -> None:
    root = tmp_path / "K75w7J"
    so = _extraction(root)
    child = subprocess.Popen([sys.executable, "-c", MAPPER, str(so)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == repr([str(root)])  # the child names its own extraction
        assert in_use(str(root))
        assert remove_leftover_extractions({str(root)}) == [] and so.exists()
    finally:
        child.kill()
        child.wait()
    assert not in_use(str(root))
    assert remove_leftover_extractions({str(root)}) == [str(root)] and not root.exists()


def test_only_a_package_extraction_is_removed(tmp_path: Path) -> None:
    plain = tmp_path / "not-an-extraction"
    (plain / "data").mkdir(parents=True)
    (plain / "data" / "keep.txt").write_text("mine")
    assert remove_leftover_extractions([str(plain), str(tmp_path / "gone")]) == []
    assert (plain / "data" / "keep.txt").read_text() == "mine"


def test_a_copy_of_the_package_made_since_the_load_began_is_found_by_its_model_files(tmp_path: Path) -> None:
    """A child that died inside the load named nothing: its copy is the loader-named folder, made
    after the load began, that holds this package's model .so."""
    import os
    import time
    import zipfile

    package = tmp_path / "m.pt2"
    with zipfile.ZipFile(package, "w") as zf:
        zf.writestr("m/data/aotinductor/model/c0ffee.so", b"\0" * 64)
        zf.writestr("m/data/constants/w", b"")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    since = time.time()
    ours = tmp / "K75w7J"
    _extraction(ours)  # m/data/aotinductor/model/c0ffee.so
    older = tmp / "Zz99Yy"
    _extraction(older)
    os.utime(older, (since - 3600, since - 3600))  # there before the load began
    other = tmp / "Ab12Cd"
    (other / "m" / "data" / "aotinductor" / "model").mkdir(parents=True)
    (other / "m" / "data" / "aotinductor" / "model" / "another.so").write_bytes(b"\0")  # another package
    named_otherwise = tmp / "my-folder"
    _extraction(named_otherwise)  # not a name the loader gives
    assert extractions_of(str(package), [str(tmp), "", str(tmp_path / "missing")], since) == [str(ours)]
    assert extractions_of(str(tmp_path / "not-a-zip.pt2"), [str(tmp)], since) == []
