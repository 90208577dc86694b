"""Build targets (issue 13 case 5): the CPU ISA levers, the AVX-512 check of a .so, the CUDA arch
check over kernel images."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from aoti_guard.builder.compile.targets import check_cpu_isa, check_cuda_archs, cpu_isa_configs, parse_cuda_archs
from runtime_probe.package.manifest import KernelImage, Target


def _so(tmp_path: Path, asm: str) -> Path:
    src, so = tmp_path / "f.c", tmp_path / "f.so"
    src.write_text(f'void f(void) {{ __asm__ volatile("{asm}"); }}\n')
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return so


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objdump") is None, reason="needs gcc and objdump")
def test_a_native_build_with_avx512_code_is_warned(tmp_path: Path) -> None:
    findings, detail = check_cpu_isa(None, str(_so(tmp_path, "vpxord %zmm0, %zmm0, %zmm0")), {})
    assert [f.code for f in findings] == ["build.isa_beyond_baseline"]
    assert detail["instructions"]["avx512"] >= 1 and "--cpu-isa x86-64-v3" in (findings[0].hint or "")
    # asked for explicitly: no warning
    assert check_cpu_isa("x86-64-v4", str(_so(tmp_path, "vpxord %zmm0, %zmm0, %zmm0")), {})[0] == []


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objdump") is None, reason="needs gcc and objdump")
def test_avx2_code_is_within_the_baseline(tmp_path: Path) -> None:
    findings, detail = check_cpu_isa(None, str(_so(tmp_path, "vpxor %ymm0, %ymm0, %ymm0")), {})
    assert findings == [] and detail["instructions"] == {"avx512": 0, "amx": 0}


def test_cpu_isa_levels_set_both_levers() -> None:
    assert cpu_isa_configs("x86-64-v3", lambda key: True) == {"cpp.march": "x86-64-v3", "cpp.simdlen": 256}
    assert cpu_isa_configs("native", lambda key: True) == {}
    with pytest.raises(ValueError, match=r"no cpp\.march config"):
        cpu_isa_configs("x86-64-v3", lambda key: key != "cpp.march")


def test_cuda_archs_are_parsed_and_checked() -> None:
    assert parse_cuda_archs("8.0, 9.0") == ("80", "90") and parse_cuda_archs("90a") == ("90a",)
    with pytest.raises(ValueError):
        parse_cuda_archs("hopper")
    sm90 = Target("cuda", "linux", "x86_64", kernel_archs=("sm_90a",), kernels=(KernelImage("k.cubin", "cubin", ("sm_90a",)),))
    findings = check_cuda_archs(("80", "90"), sm90)
    assert [(f.code, f.severity.value) for f in findings] == [("build.arch_uncovered", "error")]
    assert "sm_80" in findings[0].message
    sm80_ptx = Target(
        "cuda", "linux", "x86_64", kernel_archs=("sm_80",), kernels=(KernelImage("k.fatbin", "fatbin", ("sass:sm_80", "ptx:sm_80")),)
    )
    assert [f.severity.value for f in check_cuda_archs(("80", "90"), sm80_ptx)] == ["warning"]


def test_a_listed_arch_newer_than_the_build_gpu_keeps_the_ptx() -> None:
    """Inductor's multi-arch lever: emit_multi_arch_kernel (SASS + PTX) only when a listed arch is
    newer than the build GPU's, so forward-compatible PTX can cover it; nothing makes older code."""
    from aoti_guard.builder.compile.targets import cuda_arch_configs

    assert cuda_arch_configs(("80", "90"), "80") == {"aot_inductor.emit_multi_arch_kernel": True}
    assert cuda_arch_configs(("80", "90"), "90") == {}  # sm_80 is older: no lever, the check fails it
    assert cuda_arch_configs(("90",), "90") == {} and cuda_arch_configs(("90",), None) == {}
