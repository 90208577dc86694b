"""The child worker on a real package: closing it leaves nothing behind, and neither does a child
that dies with the model loaded."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from runtime_probe.child.worker import ChildCrashed, Worker

from .conftest import Built

pytestmark = pytest.mark.integration


def _load(worker: Worker, package: Path, tmp_path: Path) -> Path:
    """Load the package's model; the one folder torch's loader extracted it to. On torch 2.13+
    that is TMPDIR/aotinductor_XXXXXX, on 2.11 /tmp/XXXXXX whatever TMPDIR says
    (runtime_probe/package/extractions.py); the child names it either way."""
    reply = worker.request("load", 300, key="m", path=str(package), model_name="model")
    (root,) = reply["extracted_to"]
    assert worker.extractions == {root}
    extracted = Path(root)
    assert list(extracted.glob("*/data/aotinductor/model")), "the package was not extracted where the child said"
    if extracted.name.startswith("aotinductor_"):  # the loader takes TMPDIR
        assert extracted.parent == tmp_path
    return extracted


@pytest.mark.parametrize("prefix", [(), ("env",)], ids=["fast exit", "ordinary exit"])
def test_close_removes_the_extracted_package(example_pkg: Built, tmp_path: Path, prefix: tuple[str, ...]) -> None:
    """AOTI removes its extraction when the model is destroyed; the worker's fast exit must still
    destroy it."""
    worker = Worker(env={"TMPDIR": str(tmp_path)}, prefix=prefix)
    try:
        extracted = _load(worker, example_pkg.path, tmp_path)
    finally:
        worker.close()
    assert worker.proc.returncode == 0
    assert not extracted.exists()
    assert list(tmp_path.glob("aotinductor_*")) == []


def test_a_child_killed_with_its_model_loaded_leaves_no_extraction(example_pkg: Built, tmp_path: Path) -> None:
    """A crash never runs the model's destructor: the package's copy (its size again) stayed where
    torch put it, in /tmp on torch 2.11 (outside any folder the probe removes); the worker removes it."""
    worker = Worker(env={"TMPDIR": str(tmp_path)})
    try:
        extracted = _load(worker, example_pkg.path, tmp_path)
        os.kill(worker.pid, signal.SIGKILL)
        worker.proc.wait(timeout=30)
        with pytest.raises(ChildCrashed):
            worker.request("ping", 30)
        assert not extracted.exists(), f"the dead child's extraction was left at {extracted}"
    finally:
        worker.close()


def test_a_child_that_dies_inside_the_load_leaves_no_extraction(example_pkg: Built, tmp_path: Path) -> None:
    """The crash comes after torch extracted the package and before the child could name where
    (the GPU machine's C++-runtime segfault comes at the .so's dlopen): its copy is found by what it
    holds, in TMPDIR (2.13+) or /tmp (2.11), and removed."""
    import time

    from runtime_probe.package.extractions import extractions_of
    from tests.hostile.faults import inject_env

    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    since = time.time()
    worker = Worker(env={**inject_env(tmp_path, "crash_after_load"), "TMPDIR": str(tmpdir)})
    try:
        with pytest.raises(ChildCrashed):
            worker.request("load", 300, key="m", path=str(example_pkg.path), model_name="model")
    finally:
        worker.close()
    assert list(tmpdir.iterdir()) == []
    assert extractions_of(str(example_pkg.path), ["/tmp", str(tmpdir)], since) == []
