"""Issue 25, defect 6: what ``runtime_probe.load`` says when this process cannot load a package at
all: a missing TMPDIR (torch extracts there and raised a bare ``RuntimeError: Error generating
temporary directory``) and no torch (a raw ``ModuleNotFoundError`` traceback). Both are now a
ToolError carrying the probe's finding code and a hint. Each runs in a fresh interpreter: the
test process's own torch and TMPDIR stay untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Built

pytestmark = pytest.mark.integration

CALL = """
import json, sys
{prelude}
import runtime_probe
try:
    runtime_probe.load(sys.argv[1])
except runtime_probe.ToolError as exc:
    print(json.dumps({{"type": type(exc).__name__, "code": exc.code, "message": exc.message, "hint": exc.hint}}))
"""


def _load(pkg: Path, prelude: str = "", **env: str) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-P", "-c", CALL.format(prelude=prelude), str(pkg)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert proc.returncode == 0 and proc.stdout.strip(), f"no ToolError: {proc.stderr[-2000:]}"
    result: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_a_missing_tmpdir_is_env_tmpdir_unusable(static_pkg: Built, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    got = _load(static_pkg.path, TMPDIR=str(missing))
    assert got["code"] == "env.tmpdir_unusable" and str(missing) in got["message"]
    assert "set TMPDIR to a writable folder" in got["hint"]


def test_no_torch_is_env_torch_missing_with_the_version_to_install(static_pkg: Built) -> None:
    import torch

    got = _load(static_pkg.path, prelude="sys.modules['torch'] = None  # this interpreter has no torch")
    assert got["code"] == "env.torch_missing" and "cannot import it" in got["message"]
    public = torch.__version__.split("+", 1)[0]
    # a CPU package: the CPU wheel of the build's release, whatever wheel the build ran on (issue 44)
    assert got["hint"].startswith(f"install torch {public}, the CPU wheel ({public}+cpu)") and got["hint"].endswith(" in this environment")
