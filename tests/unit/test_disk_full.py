"""A full disk is the machine's doing, and the tools say so (runtime_probe.reporting.errors.environment_error).

The GPU zoo ran nine full-size builds at once on a 64 GB disk: builds that hit the full disk in
their own process ended as "tool.bug: build failed unexpectedly (a bug)", and a validation child
that hit it got the generic run.error hint."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from aoti_guard.cli import main as aoti_guard_main
from runtime_probe.reporting.errors import ToolError, environment_error


def test_enospc_and_quota_are_tool_errors_with_a_hint() -> None:
    full = environment_error(OSError(errno.ENOSPC, "No space left on device", "/data/out/.aoti-guard-x/model.pt2"))
    assert isinstance(full, ToolError) and full.exit_code == 3
    assert full.message == "no space left on device writing /data/out/.aoti-guard-x/model.pt2"
    assert full.hint and "TMPDIR" in full.hint and "TORCHINDUCTOR_CACHE_DIR" in full.hint
    quota = environment_error(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert quota is not None and quota.message == "disk quota exceeded"
    assert environment_error(OSError(errno.EACCES, "Permission denied")) is None  # not the machine's fullness
    assert environment_error(ValueError("no")) is None


def test_a_build_that_fills_the_disk_says_so_not_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aoti_guard.builder import pipeline

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "model.pt2"))

    monkeypatch.setattr(pipeline, "build", full_disk)
    report = tmp_path / "build.json"
    rc = aoti_guard_main(["build", "-o", str(tmp_path / "model.pt2"), "--json", str(report)])
    err = capsys.readouterr().err
    assert rc == 3
    assert "no space left on device" in err and "bug" not in err
    (finding,) = [f for p in json.loads(report.read_text())["phases"] for f in p["findings"]]
    assert finding["code"] == "tool.failed" and "TMPDIR" in finding["hint"]


def test_a_full_disk_in_the_child_gets_the_disk_hint() -> None:
    from runtime_probe.child.failures import Reporter, failure_finding
    from runtime_probe.child.worker import ChildRaised

    exc = ChildRaised("run", "", "", 0.1, evidence={"type": "OSError", "message": "[Errno 28] No space left on device"})
    f = failure_finding(exc, "running the compiled release model on golden sample mid", "run", Reporter("golden"))
    assert f.code == "run.error" and "disk is full" in (f.hint or "")
