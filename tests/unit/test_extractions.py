"""runtime_probe/package/extractions.py: a child names where its package was extracted (its memory
map), and what a dead child left there is removed, never what a live process still maps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runtime_probe.package.extractions import extraction_roots, extractions_of, in_use, made_by_the_loader, remove_leftover_extractions

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
from runtime_probe.package.extractions import own_extraction_roots
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
print(own_extraction_roots(), flush=True)
sys.stdin.read()
"""


def test_a_folder_a_live_process_maps_is_kept_and_removed_once_it_is_gone(tmp_path: Path) -> None:
    import time

    since = time.time()
    root = tmp_path / "K75w7J"
    so = _extraction(root)
    child = subprocess.Popen([sys.executable, "-c", MAPPER, str(so)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == repr([str(root)])  # the child names its own extraction
        assert in_use(str(root))
        assert remove_leftover_extractions({str(root)}, [str(tmp_path)], since) == [] and so.exists()
    finally:
        child.kill()
        child.wait()
    assert not in_use(str(root))
    assert remove_leftover_extractions({str(root)}, [str(tmp_path)], since) == [str(root)] and not root.exists()


def test_only_a_folder_the_loader_made_in_a_temp_folder_is_ever_removed(tmp_path: Path) -> None:
    """A child runs the package's own native code, so what it names is hostile: a user's folder
    that holds an unpacked package, a loader-like name outside the temp folders, a link, a folder
    with no package in it, a loader-like folder there before the child was started are all kept."""
    import os
    import time

    since = time.time()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    project = tmp_path / "my-project"  # the user's own unpacked package
    _extraction(project)
    elsewhere = tmp_path / "K75w7J"  # the loader's kind of name, but not in a temp folder
    _extraction(elsewhere)
    empty = tmp / "Ab12Cd"  # no package in it
    (empty / "data").mkdir(parents=True)
    link = tmp / "Zz99Yy"  # a link to the user's folder
    link.symlink_to(project)
    older = tmp / "Q9w8E7"  # a loader-like folder with a package, there before the child started
    _extraction(older)
    os.utime(older, (since - 3600, since - 3600))
    named = [str(project), str(elsewhere), str(empty), str(link), str(older), str(tmp / "gone"), "/"]
    assert remove_leftover_extractions(named, [str(tmp), "/tmp"], since) == []
    assert all(p.exists() for p in (project, elsewhere, empty, link, older)) and list(project.rglob("*.so"))
    assert not made_by_the_loader(str(project), [str(tmp_path)], since) and not made_by_the_loader(str(link), [str(tmp)], since)
    assert not made_by_the_loader(str(older), [str(tmp)], since)
    ours = tmp / "aotinductor_Q1w2E3"
    _extraction(ours)
    assert made_by_the_loader(str(ours), [str(tmp)], since)
    assert remove_leftover_extractions([*named, str(ours)], [str(tmp)], since) == [str(ours)]


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


HOSTILE_LOAD = """
import os
from runtime_probe.child import ops

def hostile_load(state, **kw):  # a package's native code owns the child: it names the user's folder
    return {"extracted_to": [os.environ["VICTIM"], os.environ["VICTIM_IN_TMP"], os.environ["VICTIM_OLDER"]]}

ops.OPS["load"] = hostile_load
"""


def test_a_child_naming_a_users_folder_gets_nothing_removed(tmp_path: Path) -> None:
    """The worker's side: a load reply that names folders outside what the loader makes (a user's
    unpacked package; a loader-like name whose parent is not a temp folder) is ignored, also when
    the child then dies."""
    import os
    import signal

    import pytest

    from runtime_probe.child.worker import ChildCrashed, Worker

    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(HOSTILE_LOAD)
    victim = tmp_path / "project"
    _extraction(victim)
    victim_in_tmp = tmp_path / "work" / "K75w7J"
    _extraction(victim_in_tmp)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    older = tmpdir / "Q9w8E7"  # the loader's kind of folder in the child's TMPDIR, from before the child
    _extraction(older)
    os.utime(older, (0, 0))
    env = {
        "PYTHONPATH": str(inject),
        "VICTIM": str(victim),
        "VICTIM_IN_TMP": str(victim_in_tmp),
        "VICTIM_OLDER": str(older),
        "TMPDIR": str(tmpdir),
    }
    worker = Worker(env=env)
    try:
        worker.request("load", 60, key="m", path=str(tmp_path / "m.pt2"))
        assert worker.extractions == set()
        os.kill(worker.pid, signal.SIGKILL)
        worker.proc.wait(timeout=30)
        with pytest.raises(ChildCrashed):
            worker.request("ping", 30)
    finally:
        worker.close()
    assert list(victim.rglob("*.so")) and list(victim_in_tmp.rglob("*.so")) and list(older.rglob("*.so"))
