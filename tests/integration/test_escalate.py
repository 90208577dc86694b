"""The escalation ladder on CPU with real packages (the GPU cases: tests/gpu, docs/gpu-validation.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.faults import inject_env

from .conftest import Built, run_probe
from .test_probe import codes, probe_json, status

pytestmark = pytest.mark.integration

CUDA_FIXTURE = Path(__file__).parent.parent / "data" / "cuda_example.pt2"


def escalate_phase(report: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in report["phases"] if p["name"] == "escalate")


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed (.ci/run installs it)")
def test_cxx_runtime_crash_at_load_is_named_and_its_remedy_verified(static_pkg: Built, tmp_path: Path) -> None:
    """The GPU machine's C++ runtime crash, injected on CPU (tests/hostile/faults.py "cxx"): a
    SIGSEGV in libstdc++'s std::locale at load that a preloaded libstdc++ makes go away."""
    report_path = tmp_path / "cxx.json"
    env = inject_env(tmp_path, "cxx")
    proc = run_probe(str(static_pkg.path), "--json", str(report_path), "--escalate-timeout", "300", env=env)
    report = json.loads(report_path.read_text())
    assert proc.returncode == 1, proc.stdout[-2000:]
    load = next(p for p in report["phases"] if p["name"] == "load")
    assert [f["found"] for f in load["findings"] if f["code"] == "load.crash"] == ["SIGSEGV"]
    esc = escalate_phase(report)
    steps = {s["step"]: s for s in esc["detail"]["steps"]}
    assert list(steps) == ["strict", "native", "remedy"]
    assert steps["native"]["evidence"]["cause"] == "cxx_runtime"
    cause = next(f for f in esc["findings"] if f["code"] == "env.cxx_runtime_mismatch" and f["severity"] == "error")
    assert "std::locale" in cause["evidence"]["deciding_frame"] and "durable fix: rebuild the package" in cause["hint"]
    remedy = next(f for f in esc["findings"] if f["code"] == "env.cxx_runtime_mismatch" and f["severity"] == "info")
    assert remedy["evidence"]["remedy"]["verified"] is True and "libstdc++" in remedy["evidence"]["remedy"]["env"]["LD_PRELOAD"]
    # the command names the package the user gave, not the probe's private copy
    assert str(static_pkg.path) in remedy["evidence"]["remedy"]["command"]


def test_nonfinite_inputs_climb_to_the_twin(sqrt_pkg: Built, tmp_path: Path) -> None:
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    x = torch.rand(4, 8) + 0.5
    x[1, 2] = -3.0
    inputs = tmp_path / "bad.safetensors"
    _safetensors.dump({"x": x}, inputs)
    proc, report = probe_json(sqrt_pkg.path, tmp_path, "--inputs", str(inputs))
    assert proc.returncode == 1
    assert "run.nonfinite" in codes(report)
    golden = next(p for p in report["phases"] if p["name"] == "golden")
    assert [r["sample"] for r in golden["detail"]["runs"]][-1] == "inputs"
    # the report names the file that ran and the inputs it fed (issue 44)
    assert (golden["detail"]["runs"][-1]["file"], golden["detail"]["runs"][-1]["inputs"]) == (str(inputs.resolve()), ["x"])
    esc = escalate_phase(report)
    steps = {s["step"]: s for s in esc["detail"]["steps"]}
    assert steps["strict"]["outcome"] == "non-finite output"
    assert steps["twin"]["evidence"]["launched"], "the twin's kernel printer said nothing"
    named = next(f for f in esc["findings"] if f["code"] == "run.nonfinite")
    assert named["severity"] == "error" and "sqrt" in named["evidence"]["kernel"], named
    assert esc["status"] == "failed"


def test_no_escalate_skips_the_ladder(sqrt_pkg: Built, tmp_path: Path) -> None:
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    inputs = tmp_path / "bad.safetensors"
    _safetensors.dump({"x": -torch.ones(4, 8)}, inputs)
    proc, report = probe_json(sqrt_pkg.path, tmp_path, "--inputs", str(inputs), "--no-escalate")
    assert proc.returncode == 1
    assert escalate_phase(report)["status"] == "skipped" and escalate_phase(report)["detail"]["reason"] == "--no-escalate"


def test_inputs_are_checked_against_the_contract_by_name(sqrt_pkg: Built, tmp_path: Path) -> None:
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    wrong = tmp_path / "wrong.safetensors"
    _safetensors.dump({"x": torch.rand(4, 9)}, wrong)
    proc, report = probe_json(sqrt_pkg.path, tmp_path, "--inputs", str(wrong))
    assert proc.returncode == 1
    finding = next(f for p in report["phases"] for f in p["findings"] if f["code"] == "input.shape")
    assert finding["evidence"]["argument"] == "x" and "dim 1 is 9, expected 8" in finding["message"]
    missing = tmp_path / "missing.safetensors"
    _safetensors.dump({"y": torch.rand(4, 8)}, missing)
    _, report = probe_json(sqrt_pkg.path, tmp_path, "--inputs", str(missing))
    assert "input.count" in codes(report)


def test_cuda_package_built_on_the_gpu_machine_on_a_cpu_host(tmp_path: Path) -> None:
    """The fixture was built on an H100 (torch 2.11.0+cu130) by scripts/gpu/explore.sh (removed,
    last in commit 0cc60b5) and scrubbed of that machine's paths by scripts/gpu/sanitize_fixture.py
    (docs/gpu-validation.md)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    proc, report = probe_json(CUDA_FIXTURE, tmp_path)
    assert proc.returncode == 1
    assert "env.device_unavailable" in codes(report)
    assert status(report)["load"] == "skipped", "nothing native may be opened on a host that cannot run it"
    host = next(p for p in report["phases"] if p["name"] == "host")
    assert host["status"] == "failed"
    from runtime_probe.host.cpu import cpu_flags

    if "avx512f" not in (cpu_flags() or set()):
        # it was built with -march=native on an AVX-512/AMX Xeon: this CPU could not run its .so
        assert "env.cpu_isa_missing" in codes(report)


def test_all_devices_on_a_host_without_gpus(tmp_path: Path) -> None:
    """--all-devices with no GPU visible: one section that says so (the child that counted the
    GPUs is reused for it), no crash."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    proc, report = probe_json(CUDA_FIXTURE, tmp_path, "--all-devices", "--no-escalate")
    assert proc.returncode == 1
    assert [s["title"] for s in report["sections"]] == ["cuda (no device visible)"]
    section = report["sections"][0]
    assert "env.device_unavailable" in codes(section)
    assert {p["name"]: p["status"] for p in section["phases"]}["load"] == "skipped"


def test_cuda_fixture_inspects_without_cuda() -> None:
    from runtime_probe.inspect import inspect_package

    data = inspect_package(str(CUDA_FIXTURE))
    assert data["manifest"]["target"]["device_type"] == "cuda"
    assert data["manifest"]["target"]["kernel_archs"] == ["sm_90a"]
    assert all(k["arch"] == "sm_90a" for k in data["models"]["model"]["kernels"])
    assert data["manifest"]["toolchain"]["torch"].startswith("2.11")
