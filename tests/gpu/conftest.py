"""GPU tests: run on the lent GPU machine by scripts/gpu_validation.sh (deselected elsewhere).

Packages are built by the script beforehand, in parallel (AOTI_GUARD_GPU_PKGS names the folder);
each test writes its report under AOTI_GUARD_GPU_RESULTS for docs/gpu-validation.md. Where the
machine needs a preloaded C++ runtime to load any package (AOTI-FACTS.md), the script passes it
as AOTI_GUARD_GPU_PRELOAD and the tests that are about other failures set it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PKGS = Path(os.environ.get("AOTI_GUARD_GPU_PKGS", "gpu-packages"))
RESULTS = Path(os.environ.get("AOTI_GUARD_GPU_RESULTS", "gpu-results"))
PRELOAD = os.environ.get("AOTI_GUARD_GPU_PRELOAD", "")


def pkg(name: str) -> Path:
    path = PKGS / f"{name}.pt2"
    if not path.exists():
        pytest.fail(f"{path} was not built (run scripts/gpu_validation.sh)")
    return path


def probe(name: str, *args: str, preload: bool, timeout: float = 560) -> tuple[int, dict[str, Any], str]:
    """Run `python -m runtime_probe` on a package; save and return (exit code, report, output)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    report_path = RESULTS / f"{name}.json"
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if preload and PRELOAD:
        env["LD_PRELOAD"] = PRELOAD
    proc = subprocess.run(
        [sys.executable, "-m", "runtime_probe", *args, "--json", str(report_path)], capture_output=True, text=True, timeout=timeout, env=env
    )
    (RESULTS / f"{name}.txt").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr[-4000:])
    assert "Traceback" not in proc.stdout, proc.stdout[-3000:]
    return proc.returncode, json.loads(report_path.read_text()), proc.stdout


def findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    out = [f for p in report["phases"] for f in p["findings"]]
    for s in report.get("sections", []):
        out += findings(s)
    return out
