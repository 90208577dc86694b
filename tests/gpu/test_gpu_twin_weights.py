"""A debug twin without weights of its own on CUDA (``--twin-weights shared``): the default there
too since issue 26 (aoti_guard/builder/twin/schedule.py, ``weights``); these confirm it on a GPU. The CPU
counterpart, run in CI: tests/integration/test_twin_weights.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from .conftest import PRELOAD, RESULTS, findings, pkg, probe

pytestmark = pytest.mark.gpu


def test_the_build_ran_the_shared_twin_on_the_release_weights() -> None:
    report = json.loads(pkg("nan_shared").with_suffix(".build.json").read_text())
    assert report["passed"], report
    twin = next(p for p in report["phases"] if p["name"] == "debug_twin")["detail"]["check"]
    # the twin is its own compile (the level-2 value printer, issue 26): run 15 saw 1.2e-7 (1 ulp)
    assert twin["kernels"] and twin["max_abs_vs_release"] <= 1e-6, twin
    with zipfile.ZipFile(pkg("nan_shared")) as zf:
        root = zf.namelist()[0].split("/", 1)[0]
        manifest = json.loads(zf.read(f"{root}/extra/aoti_guard/manifest.json"))
    assert manifest["debug_twin"] is None and manifest["debug_twin_without_weights"]["weights"] == "release"


def test_the_probe_escalates_to_the_shared_twin_and_names_the_kernel() -> None:
    bad = pkg("nan_shared").with_name("nan_bad.safetensors")
    code, report, _ = probe("probe_nan_shared", str(pkg("nan_shared")), "--inputs", str(bad), preload=True)
    assert code == 1
    escalate = next(p for p in report["phases"] if p["name"] == "escalate")
    twin = next(s for s in escalate["detail"]["steps"] if s["step"] == "twin")
    assert not twin["outcome"].startswith("crashed"), twin
    named = [f for f in findings(report) if f["code"] == "run.nonfinite" and f["evidence"].get("kernel")]
    assert named and "sqrt" in named[0]["evidence"]["kernel"], [f["message"] for f in findings(report)]


def test_the_guarded_loader_runs_the_shared_twin_like_the_release_model() -> None:
    script = f"""
import torch, runtime_probe
x = torch.rand(8, 32, device="cuda") + 1.0
release = runtime_probe.load({str(pkg("nan_shared"))!r})(x)
twin = runtime_probe.load({str(pkg("nan_shared"))!r}, model="debug_twin")(x)
torch.cuda.synchronize()
print("DIFF", float((release - twin).abs().max()), float(release.abs().max()))
"""
    env = {**os.environ, **({"LD_PRELOAD": PRELOAD} if PRELOAD else {})}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    (RESULTS / "guard_twin_shared.txt").write_text(proc.stdout + proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    diff, scale = (float(v) for v in proc.stdout.split("DIFF", 1)[1].split())
    assert scale > 0.1 and diff <= 1e-6 * scale
