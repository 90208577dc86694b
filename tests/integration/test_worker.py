"""The child worker on a real package: closing it leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_probe.child.worker import Worker

from .conftest import Built

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("prefix", [(), ("env",)], ids=["fast exit", "ordinary exit"])
def test_close_removes_the_extracted_package(example_pkg: Built, tmp_path: Path, prefix: tuple[str, ...]) -> None:
    """AOTI extracts a package under $TMPDIR and removes it when the model is destroyed; the
    worker's fast exit must still destroy it."""
    worker = Worker(env={"TMPDIR": str(tmp_path)}, prefix=prefix)
    try:
        worker.request("load", 300, key="m", path=str(example_pkg.path), model_name="model")
        assert list(tmp_path.glob("aotinductor_*")), "the package was not extracted where expected"
    finally:
        worker.close()
    assert worker.proc.returncode == 0
    assert list(tmp_path.glob("aotinductor_*")) == []
