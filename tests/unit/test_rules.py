"""Host compatibility rules and size expressions."""

from __future__ import annotations

import pytest

from runtime_probe.formats.symexpr import ExprError, compile_expr, free_symbols
from runtime_probe.host.rules import Requirements, arch_runs_on, check_host, compare_torch
from runtime_probe.host.skew import SKEW, SkewRow, minor, skew_finding, torch_to_install


@pytest.mark.parametrize(
    ("arch", "cap", "ok"),
    [
        ("sm_90", "90", True),
        ("sm_90a", "90", True),
        ("sm_90a", "100", False),
        ("sm_80", "86", True),
        ("sm_86", "80", False),
        ("sm_80", "90", False),
        ("sm_100a", "103", False),
        ("sm_120", "120", True),
    ],
)
def test_arch_rule(arch: str, cap: str, ok: bool) -> None:
    assert arch_runs_on(arch, cap) is ok


@pytest.mark.parametrize(
    ("build", "host", "verdict"),
    [
        ("2.11.0+cu130", "2.11.0+cu130", "exact"),
        ("2.11.0+cu130", "2.11.1+cu128", "compatible"),
        ("2.11.0", "2.13.0", "newer"),
        ("2.13.0+cpu", "2.11.0+cu130", "older"),
    ],
)
def test_torch_rule(build: str, host: str, verdict: str) -> None:
    assert compare_torch(build, host) == verdict


PARENT = {"platform": "linux", "machine": "x86_64", "cpu": "test cpu", "cpu_flags": ["avx", "avx2", "fma"], "libc": "glibc 2.36"}
CHILD_CPU = {"torch": "2.13.0+cpu", "cuda_available": False, "devices": [], "cuda_runtime": None}
H100 = {
    "torch": "2.11.0+cu130",
    "cuda_available": True,
    "cuda_runtime": "13.0",
    "devices": [{"index": 0, "name": "H100", "capability": "90", "free_memory": 80 << 30}],
    "driver": {"cuda_version": "13.0", "version": "580"},
}


def codes(findings: list) -> set[str]:  # type: ignore[type-arg]
    return {f.code for f in findings}


def test_cpu_isa_missing_is_fatal() -> None:
    req = Requirements(device_type="cpu", cpu_isa=("avx2", "avx512f"), torch="2.13.0+cpu")
    findings, go_on = check_host(req, PARENT, CHILD_CPU, "cpu", None)
    assert "env.cpu_isa_missing" in codes(findings) and not go_on
    assert "avx512f" in next(f.message for f in findings if f.code == "env.cpu_isa_missing")


def test_cuda_package_on_cpu_host() -> None:
    req = Requirements(device_type="cuda", kernel_archs=("sm_90",))
    findings, go_on = check_host(req, PARENT, CHILD_CPU, "cuda", None)
    assert codes(findings) >= {"env.device_unavailable"} and not go_on


def test_arch_driver_memory_index() -> None:
    req = Requirements(device_type="cuda", kernel_archs=("sm_80",), cuda_runtime="13.1", constants_bytes=100 << 30, torch="2.11.0+cu130")
    findings, go_on = check_host(req, PARENT, H100, "cuda", None)
    assert {"env.arch_mismatch", "env.driver_too_old", "env.memory_insufficient"} <= codes(findings) and not go_on
    findings, _ = check_host(Requirements(device_type="cuda"), PARENT, H100, "cuda", 3)
    assert "env.device_index_invalid" in codes(findings)


def test_the_manifests_cuda_arch_list_drives_the_arch_rule() -> None:
    """Issue 13 case 5: the build records its checked --cuda-arch list (manifest 1.2); the probe's
    arch rule uses it. An sm_80 build with forward-compatible PTX, listed for 8.0,9.0, loads on an
    sm_90 GPU (the driver JIT-compiles the PTX: a warning, as the build said); without the list the
    same kernels are an error, and an arch the list leaves out is named as such."""
    sm80_ptx = {"device_type": "cuda", "kernel_archs": ("sm_80",), "ptx_archs": ("80",), "torch": "2.11.0+cu130"}
    listed, go_on = check_host(Requirements(**sm80_ptx, cuda_archs=("80", "90")), PARENT, H100, "cuda", None)  # type: ignore[arg-type]
    arch = [f for f in listed if f.code == "env.arch_mismatch"]
    assert go_on and [f.severity.value for f in arch] == ["warning"] and "compute_80" in arch[0].message
    unlisted, go_on = check_host(Requirements(**sm80_ptx), PARENT, H100, "cuda", None)  # type: ignore[arg-type]
    assert not go_on and [f.severity.value for f in unlisted if f.code == "env.arch_mismatch"] == ["error"]
    only80, go_on = check_host(Requirements(**sm80_ptx, cuda_archs=("80",)), PARENT, H100, "cuda", None)  # type: ignore[arg-type]
    err = next(f for f in only80 if f.code == "env.arch_mismatch")
    assert not go_on and err.severity.value == "error" and "--cuda-arch 80 only" in err.message
    no_ptx, go_on = check_host(
        Requirements(device_type="cuda", kernel_archs=("sm_80",), cuda_archs=("80", "90")), PARENT, H100, "cuda", None
    )
    assert not go_on and any(f.code == "env.arch_mismatch" and f.severity.value == "error" for f in no_ptx)


def test_requirements_read_the_cuda_arch_list_and_ptx_from_the_manifest() -> None:
    import json

    from runtime_probe.package.manifest import dump_manifest, parse_manifest

    from .test_manifest import minimal

    m = minimal()
    m["target"].update(
        device_type="cuda",
        kernel_archs=["sm_80"],
        kernels=[{"entry": "k.fatbin", "kind": "fatbin", "archs": ["sass:sm_80", "ptx:sm_80"]}],
        cuda_archs=["80", "90"],
    )
    manifest = parse_manifest(json.dumps(m).encode())
    req = Requirements.from_manifest(manifest)
    assert req.cuda_archs == ("80", "90") and req.ptx_archs == ("80",)
    assert json.loads(dump_manifest(manifest))["target"]["cuda_archs"] == ["80", "90"]
    del m["target"]["cuda_archs"]  # a manifest without the list reads and dumps as before 1.2
    plain = parse_manifest(json.dumps(m).encode())
    assert plain.target.cuda_archs is None and "cuda_archs" not in json.loads(dump_manifest(plain))["target"]


def test_torch_versions() -> None:
    """Skew between minor releases is judged by the table of pairs run (host/skew.py)."""
    # 2.15 -> 2.13 on CPU: seen to load and pass (issue 27's runs)
    seen, go_on = check_host(Requirements(device_type="cpu", torch="2.15.0+cu132"), PARENT, CHILD_CPU, "cpu", None)
    assert [(f.code, f.severity.value) for f in seen] == [("env.torch_skew_seen", "info")] and go_on
    assert "issue 27" in seen[0].message
    # 2.11 -> 2.13 never run: a warning that names the pairs that were
    unseen, go_on = check_host(Requirements(device_type="cpu", torch="2.11.0"), PARENT, CHILD_CPU, "cpu", None)
    assert [(f.code, f.severity.value) for f in unseen] == [("env.torch_skew_unseen", "warning")] and go_on
    assert "2.15 -> 2.13" in (unseen[0].expected or "")
    # same minor, another tag: not skew
    tag, _ = check_host(Requirements(device_type="cpu", torch="2.13.0+cu130"), PARENT, CHILD_CPU, "cpu", None)
    assert [(f.code, f.severity.value) for f in tag] == [("env.torch_mismatch", "info")]


def test_skew_table_rows() -> None:
    rows = (
        SkewRow("2.14", "2.13", "cuda", False, "run X: undefined symbol aoti_torch_foo"),
        SkewRow("2.13", "2.14", "cuda", True, "run Y"),
    )
    fails = skew_finding("2.14.1+cu130", "2.13.0+cu130", "cuda", rows)
    assert fails is not None and (fails.code, fails.severity.value) == ("env.torch_skew_fails", "error")
    assert "run X" in fails.message and fails.hint and "2.14" in fails.hint
    passes = skew_finding("2.13.0", "2.14.1", "cuda", rows)
    assert passes is not None and (passes.code, passes.severity.value) == ("env.torch_skew_seen", "info")
    # a CPU row says nothing about CUDA
    cuda = skew_finding("2.15.0", "2.13.0", "cuda")
    assert cuda is not None and cuda.code == "env.torch_skew_unseen"
    assert skew_finding("2.13.0+cpu", "2.13.1", "cpu") is None
    assert minor("2.15.0+cu132") == "2.15" and minor("nightly") is None
    for row in SKEW:  # every row says which run established it
        assert row.device in ("cpu", "cuda") and minor(row.build + ".0") == row.build and len(row.evidence) > 40


def test_glibc_too_old() -> None:
    findings, go_on = check_host(Requirements(device_type="cpu", glibc="GLIBC_2.38"), PARENT, CHILD_CPU, "cpu", None)
    assert "env.libstdcxx_too_old" in codes(findings) and not go_on


def test_no_torch() -> None:
    findings, go_on = check_host(Requirements(device_type="cpu"), PARENT, {"torch_error": "ModuleNotFoundError"}, "cpu", None)
    assert codes(findings) == {"env.torch_missing"} and not go_on


def test_no_torch_names_the_cpu_wheel_for_a_cpu_package_and_the_cuda_one_for_a_cuda_package() -> None:
    """Issue 44: a CPU package built on torch 2.15.0+cu132 was told to install that CUDA wheel."""
    no_torch = {"torch_error": "ModuleNotFoundError"}
    cpu, _ = check_host(Requirements(device_type="cpu", torch="2.15.0+cu132"), PARENT, no_torch, "cpu", None)
    (missing,) = cpu
    assert missing.expected == "torch 2.15.0"
    assert missing.hint is not None and missing.hint.startswith(
        "install torch 2.15.0, the CPU wheel (2.15.0+cpu); the build ran on 2.15.0+cu132"
    )
    cuda, _ = check_host(Requirements(device_type="cuda", torch="2.15.0+cu132"), PARENT, no_torch, "cuda", 0)
    (missing,) = cuda
    assert (
        missing.expected == "torch 2.15.0+cu132"
        and missing.hint == "install torch 2.15.0+cu132, the CUDA 13.2 wheel the package was built with"
    )
    assert torch_to_install("2.13.0+cpu", "cpu") == "torch 2.13.0, the CPU wheel (2.13.0+cpu)"
    assert torch_to_install("2.14.0+cu128", "cuda") == "torch 2.14.0+cu128, the CUDA 12.8 wheel the package was built with"
    assert torch_to_install("2.14.0", "cuda") == "torch 2.14.0 with CUDA" and torch_to_install(None, "cpu").startswith("torch (")


def test_expressions() -> None:
    assert compile_expr("2*batch + 1")({"batch": 3}) == 7
    assert compile_expr("FloorDiv(s0, 2) + Max(1, s1)")({"s0": 9, "s1": 0}) == 5
    assert free_symbols("s0*s1 + 2") == {"s0", "s1"}
    for bad in ("__import__('os')", "x.y", "a ** b", "lambda: 1", "1/0", "[1]"):
        with pytest.raises(ExprError):
            compile_expr(bad)({"a": 1, "b": 2, "x": 1})
