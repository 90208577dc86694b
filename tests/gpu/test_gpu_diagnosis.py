"""Issue 13 on the GPU: the build explains its own failures (cases 2, 3), device asserts and value
ranges (case 4), and --cuda-arch (case 5). Packages: scripts/gpu_validation.sh, "issue 13" section."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from .conftest import PKGS, PRELOAD, RESULTS, findings, pkg, probe

pytestmark = pytest.mark.gpu


def build_report(name: str) -> dict[str, Any]:
    path = PKGS / f"{name}.build.json"
    if not path.exists():
        pytest.fail(f"{path} was not written (run scripts/gpu_validation.sh)")
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def test_build_without_preload_diagnoses_its_own_load_crash() -> None:
    """Case 2: built without LD_PRELOAD, the validation child crashes at load; the build names
    env.cxx_runtime_mismatch, verifies an LD_PRELOAD remedy and gives the durable fix."""
    report = build_report("example_nopreload")
    found = findings(report)
    if report["passed"]:
        pytest.skip("the package loaded without a preload on this machine: nothing to diagnose")
    assert any(f["code"] == "load.crash" for f in found), [f["code"] for f in found]
    cause = [f for f in found if f["code"] == "env.cxx_runtime_mismatch" and f["severity"] == "error"]
    remedy = [f for f in found if f["code"] == "env.cxx_runtime_mismatch" and f["severity"] == "info"]
    assert cause and "durable fix: rebuild the package" in cause[0]["hint"] and cause[0]["expected"]
    assert remedy and remedy[0]["evidence"]["remedy"]["verified"] is True


def test_build_names_the_nan_buffer_and_kernel() -> None:
    """Case 3: the twin's NaN assert is an error naming the first buffer and the kernel."""
    report = build_report("masked_softmax")
    assert not report["passed"]
    twin = [f for f in findings(report) if f["code"] == "build.nonfinite" and "debug twin" in f["message"]]
    assert twin and twin[0]["severity"] == "error", [(f["code"], f["message"][:160]) for f in findings(report)]
    assert twin[0]["evidence"]["buffer"].startswith("buf") and twin[0]["evidence"]["kernel"]
    assert not any(f["code"] == "build.twin_failed" for f in findings(report))


def _bad_ids() -> Path:
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    ids = torch.randint(0, 1000, (4, 6))
    ids[2, 5] = 1_000_000_000
    path = RESULTS / "embed_bad_ids.safetensors"
    RESULTS.mkdir(parents=True, exist_ok=True)
    _safetensors.dump({"ids": ids}, str(path))
    return path


def test_out_of_vocabulary_ids_are_named_before_native_code_runs() -> None:
    """Case 4: the manifest records ids' value range; --inputs is checked before any kernel."""
    with zipfile.ZipFile(pkg("embed")) as zf:
        root = zf.namelist()[0].split("/")[0]
        m = json.loads(zf.read(f"{root}/extra/aoti_guard/manifest.json"))
    assert m["io"]["inputs"][0]["tensor"]["value_range"] == [0, 999]
    code, report, _ = probe("probe_embed_oov", str(pkg("embed")), "--inputs", str(_bad_ids()), "--escalate-timeout", "200", preload=True)
    assert code == 1
    oov = [f for f in findings(report) if f["code"] == "input.value_range"]
    assert oov and oov[0]["message"] == "ids holds 1000000000 at [2, 5]; the table has 1000 rows"
    assert not any(f["code"] in ("run.device_assert", "run.illegal_memory_access", "run.error") for f in findings(report))


def test_a_device_side_assert_is_classified_as_run_device_assert() -> None:
    """Case 4: the embedding's own bounds assert, run by torch's loader, is a device assert (not
    an illegal memory access) in the probe's reader."""
    from runtime_probe.child.messages import cuda_error

    script = (
        "import sys, torch\n"
        "from runtime_probe.formats import safetensors as st\n"
        "m = torch._inductor.aoti_load_package(sys.argv[1])\n"
        "ids = st.load(sys.argv[2])['ids'].cuda()\n"
        "m(ids); torch.cuda.synchronize()\n"
    )
    env = {**os.environ, **({"LD_PRELOAD": PRELOAD} if PRELOAD else {})}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(pkg("embed")), str(_bad_ids())], capture_output=True, text=True, timeout=300, env=env
    )
    (RESULTS / "embed_device_assert.txt").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr[-6000:])
    assert proc.returncode != 0
    code, line = cuda_error(proc.stdout + "\n" + proc.stderr) or ("", "")
    assert code == "run.device_assert", line


def test_cuda_arch_lists_are_checked_against_the_kernels() -> None:
    """Case 5: on an sm_90 GPU, --cuda-arch 9.0 passes and 8.0,9.0 fails naming sm_80 (torch has
    no lever to compile Triton kernels for another arch)."""
    import torch

    cap = "".join(map(str, torch.cuda.get_device_capability(0)))
    ok = build_report("example_arch_own")
    assert ok["passed"], [(f["code"], f["message"][:160]) for f in findings(ok)]
    with zipfile.ZipFile(pkg("example_arch_own")) as zf:  # the list is recorded for the probe's arch rule
        root = zf.namelist()[0].split("/")[0]
        target = json.loads(zf.read(f"{root}/extra/aoti_guard/manifest.json"))["target"]
    assert target["cuda_archs"] == [cap]
    both = build_report("example_arch_80_90")
    if cap == "80":
        pytest.skip("the build GPU is sm_80: the 8.0,9.0 case needs another arch")
    uncovered = [f for f in findings(both) if f["code"] == "build.arch_uncovered" and f["severity"] == "error"]
    assert not both["passed"] and uncovered and "sm_80" in uncovered[0]["message"]
