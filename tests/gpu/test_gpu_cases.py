"""The probe on real CUDA failures (run on 2x H200 so far). Results: docs/gpu-validation.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from .conftest import PRELOAD, RESULTS, findings, pkg, probe

pytestmark = pytest.mark.gpu


def test_cuda_build_records_target_and_toolchain() -> None:
    report = json.loads((pkg("example").with_suffix(".build.json")).read_text())
    assert report["passed"], report
    with zipfile.ZipFile(pkg("example")) as zf:
        root = zf.namelist()[0].split("/")[0]
        m = json.loads(zf.read(f"{root}/extra/aoti_guard/manifest.json"))
    import torch

    cap = "".join(map(str, torch.cuda.get_device_capability(0)))
    assert m["target"]["device_type"] == "cuda" and m["target"]["compute_capability"] == cap
    assert m["target"]["kernel_archs"] and all(a.startswith(f"sm_{cap}") for a in m["target"]["kernel_archs"])
    assert m["toolchain"]["cuda_runtime"] == torch.version.cuda
    (RESULTS / "manifest_target_toolchain.json").write_text(json.dumps({"target": m["target"], "toolchain": m["toolchain"]}, indent=1))


def test_probe_of_the_cuda_build_explains_its_load() -> None:
    """Without any preload. Where the load crashes (AOTI-FACTS: every package on these machines),
    the ladder must name the cause from the native frames and verify a remedy."""
    code, report, text = probe("probe_example_plain", str(pkg("example")), "--escalate-timeout", "250", preload=False, timeout=320)
    load = next(p for p in report["phases"] if p["name"] == "load")
    if load["status"] == "passed":
        assert code == 0
        pytest.skip("the load did not crash on this machine: the ladder was not exercised")
    assert any(f["code"] == "load.crash" for f in load["findings"])
    found = {f["code"]: f for f in findings(report)}
    assert "env.cxx_runtime_mismatch" in found, list(found)
    remedy = [f for f in findings(report) if f["code"] == "env.cxx_runtime_mismatch" and f["severity"] == "info"]
    assert remedy and remedy[0]["evidence"]["remedy"]["verified"] is True
    assert "LD_PRELOAD=" in remedy[0]["message"]
    assert "verified remedy: with LD_PRELOAD=" in text  # the human report shows it too, not only the JSON


def test_runtime_illegal_memory_access_names_the_kernel() -> None:
    code, report, _ = probe(
        "probe_gather_ima",
        str(pkg("gather")),
        "--inputs",
        str(pkg("gather").with_name("gather_bad.safetensors")),
        "--escalate-timeout",
        "250",
        preload=True,
        timeout=320,
    )
    assert code == 1
    kernels = {f["evidence"].get("kernel") for f in findings(report) if f["code"] == "run.illegal_memory_access"}
    assert any(k and "gather_kernel" in k for k in kernels), kernels
    escalate = next(p for p in report["phases"] if p["name"] == "escalate")
    steps = [s["step"] for s in escalate["detail"]["steps"]]
    assert "native" not in steps, steps  # a named kernel makes the debugger step unnecessary
    if "sanitizer" in steps:  # compute-sanitizer installed: it must find the planted index 77
        sanitizer = [f["evidence"]["sanitizer"] for f in findings(report) if "sanitizer" in f["evidence"]]
        assert sanitizer and sanitizer[0]["thread"] == "77,0,0", sanitizer


def test_nan_names_the_first_kernel_that_outputs_it() -> None:
    code, report, _ = probe("probe_nan", str(pkg("nan")), "--inputs", str(pkg("nan").with_name("nan_bad.safetensors")), preload=True)
    assert code == 1
    named = [f for f in findings(report) if f["code"] == "run.nonfinite" and f["evidence"].get("kernel")]
    assert named and "sqrt" in named[0]["evidence"]["kernel"], [f["message"] for f in findings(report)]


def test_cpu_tensor_to_cuda_package_is_input_device() -> None:
    code, report, _ = probe(
        "probe_cpu_tensor",
        str(pkg("nan")),
        "--inputs",
        str(pkg("nan").with_name("nan_good.safetensors")),
        "--inputs-device",
        "cpu",
        preload=True,
    )
    assert code == 1
    f = next(f for f in findings(report) if f["code"] == "input.device")
    assert f["evidence"]["argument"] == "x"
    script = f"""
import torch, runtime_probe
m = runtime_probe.load({str(pkg("nan"))!r})
try:
    m(torch.rand(8, 32) + 1.0)
except runtime_probe.InputContractError as exc:
    print("GUARDED", exc.code, exc.argument, exc)
"""
    env = {**os.environ, **({"LD_PRELOAD": PRELOAD} if PRELOAD else {})}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    (RESULTS / "guard_cpu_tensor.txt").write_text(proc.stdout + proc.stderr[-2000:])
    assert "GUARDED input.device x" in proc.stdout


RAW_CPU_TENSOR = """
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
table = torch.randn(4096)  # on the CPU: the package's first kernel is a user Triton kernel
idx = torch.randint(0, 4096, (256,), device="cuda")
try:
    out = m(table, idx); torch.cuda.synchronize()
    print("RAN without error; finite:", bool(torch.isfinite(out).all()))
except Exception as exc:
    print("RAISED", type(exc).__name__, str(exc).splitlines()[0][:300])
"""


@pytest.mark.parametrize("caching", ["on", "off"])
def test_record_plain_aoti_with_a_cpu_tensor(caching: str) -> None:
    """What plain AOTI does with a CPU tensor. Recorded for the docs, which claim what our GPU
    machines showed: it is not silent (it raises or the process aborts), with caching on or off."""
    env = {**os.environ, **({"LD_PRELOAD": PRELOAD} if PRELOAD else {})}
    if caching == "off":
        env.update(PYTORCH_NO_CUDA_MEMORY_CACHING="1", CUDA_LAUNCH_BLOCKING="1")
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", RAW_CPU_TENSOR, str(pkg("gather"))],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("frame #")][:12]
    (RESULTS / f"raw_cpu_tensor_caching_{caching}.txt").write_text(f"returncode {proc.returncode}\n{proc.stdout}\n" + "\n".join(lines))
    assert "RAN without error" not in proc.stdout, proc.stdout
    assert proc.returncode != 0 or proc.stdout.startswith("RAISED"), (proc.returncode, proc.stdout)


def test_all_devices_probes_each_gpu() -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (nvidia-h200-x2)")
    code, report, _ = probe("probe_all_devices", str(pkg("example")), "--all-devices", preload=True)
    assert code == 0, [f["message"] for f in findings(report)]
    assert [s["title"] for s in report["sections"]] == [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    for s in report["sections"]:
        assert {p["name"]: p["status"] for p in s["phases"]}["golden"] == "passed"
