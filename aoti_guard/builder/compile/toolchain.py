"""Facts about the build: target device and kernels, and the toolchain that produced the .so.

Everything recorded here is what the probe later compares with a deployment host: the GPU arch of
every kernel image (read from the cubin's ELF header, not assumed), the CPU features the native
code may use, and the highest GLIBCXX/GLIBC symbol versions the .so needs.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Sequence

from runtime_probe.child.ops import loaded_libstdcxx
from runtime_probe.formats import elf as _elf
from runtime_probe.formats.wrapper_cpp import WrapperFacts
from runtime_probe.host import cpu as _cpu
from runtime_probe.package.manifest import KernelImage, Target, Toolchain

__all__ = ["build_target", "build_toolchain", "compiler_version", "native_isa_flags"]


def _run(argv: Sequence[str], timeout: float = 30.0) -> str | None:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def compiler_version(cxx: str) -> str | None:
    out = _run([cxx, "--version"])
    return out.splitlines()[0].strip() if out else None


def native_isa_flags(cxx: str, march: str | None, mflags: Sequence[str]) -> set[str]:
    """cpuinfo flags a compile with ``-march=<march> <mflags>`` may use, asked of the compiler."""
    flags = _cpu.flags_from_mflags(list(mflags))
    if march and platform.machine() in ("x86_64", "AMD64"):
        macros = _run([cxx, f"-march={march}", *mflags, "-dM", "-E", "-x", "c++", os.devnull])
        if macros:
            flags |= _cpu.flags_from_macros(macros)
    return flags


def kernel_images(files: Sequence[tuple[str, bytes]]) -> list[KernelImage]:
    """(archive entry, bytes) of .cubin/.fatbin files -> their archs, from the ELF/fatbin headers."""
    images = []
    for entry, data in files:
        if entry.endswith(".cubin"):
            try:
                arch = _elf.cubin_arch(data)
            except _elf.ElfError:
                arch = None
            images.append(KernelImage(entry, "cubin", (arch,) if arch else ()))
        elif entry.endswith(".fatbin"):
            try:
                archs = tuple(f"{kind}:{arch}" for kind, arch in _elf.fatbin_entries(data))
            except _elf.ElfError:
                archs = ()
            images.append(KernelImage(entry, "fatbin", archs))
    return images


def distinct_sass_archs(images: Sequence[KernelImage]) -> tuple[str, ...]:
    archs = set()
    for img in images:
        for a in img.archs:
            kind, _, arch = a.rpartition(":")
            if kind in ("", "sass"):
                archs.add(arch)
    return tuple(sorted(archs))


def build_target(device: str, wrapper: WrapperFacts, aoti_metadata: dict[str, str], images: Sequence[KernelImage]) -> Target:
    import torch

    device_type = device.split(":", 1)[0]
    name = capability = None
    if device_type == "cuda":
        index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        name, capability = props.name, f"{props.major}{props.minor}"
    cxx = wrapper.compiler or "g++"
    isa = native_isa_flags(cxx, wrapper.march, wrapper.isa_flags) if wrapper.compile_command else set()
    return Target(
        device_type=device_type,
        platform=aoti_metadata.get("AOTI_PLATFORM", platform.system().lower()),
        machine=aoti_metadata.get("AOTI_MACHINE", platform.machine()),
        device_name=name,
        compute_capability=capability or aoti_metadata.get("AOTI_COMPUTE_CAPABILITY") or None,
        kernel_archs=distinct_sass_archs(images),
        kernels=tuple(images),
        cpu_isa=tuple(sorted(isa)),
        aoti_cpu_isa=aoti_metadata.get("AOTI_CPU_ISA") or None,
        march=wrapper.march,
        build_cpu=_cpu.cpu_model(),
    )


def _dist(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def so_requirements(so_bytes: bytes | memoryview) -> dict[str, str | None]:
    """Highest GLIBCXX / CXXABI / GLIBC versions a .so needs, from its .gnu.version_r."""
    try:
        info = _elf.parse_elf(so_bytes)
    except _elf.ElfError:
        return {"glibcxx": None, "cxxabi": None, "glibc": None}
    names = [v for versions in info.version_needs.values() for v in versions]
    return {
        "glibcxx": _elf.max_version(names, "GLIBCXX"),
        "cxxabi": _elf.max_version(names, "CXXABI"),
        "glibc": _elf.max_version(names, "GLIBC"),
    }


def build_toolchain(wrapper: WrapperFacts, so_bytes: bytes | memoryview | None) -> Toolchain:
    import torch

    reqs = so_requirements(so_bytes) if so_bytes is not None else {"glibcxx": None, "cxxabi": None, "glibc": None}
    cxx = wrapper.compiler
    if cxx is None:
        try:
            from runtime_probe.runtime.torch_compat import cpp_compiler

            cxx = cpp_compiler()
        except Exception:  # noqa: BLE001 - best effort on older torch
            cxx = None
    driver: str | None = None
    if torch.cuda.is_available():
        try:
            with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
                driver = next((p for p in fh.readline().split() if p.count(".") >= 1 and p.replace(".", "").isdigit()), None)
        except OSError:
            driver = None
    lib = loaded_libstdcxx()
    lib_desc = None
    if lib:
        try:
            with open(lib, "rb") as fh:
                provided = _elf.parse_elf(fh.read()).version_defs
            lib_desc = f"{os.path.basename(os.path.realpath(lib))} (max {_elf.max_version(provided, 'GLIBCXX')})"
        except (OSError, _elf.ElfError):
            lib_desc = os.path.basename(os.path.realpath(lib))
    return Toolchain(
        torch=torch.__version__,
        python=platform.python_version(),
        torch_git=getattr(torch.version, "git_version", None),
        triton=_dist("triton") or _dist("pytorch-triton"),
        cuda_runtime=torch.version.cuda,
        driver=driver,
        cxx=cxx,
        cxx_version=compiler_version(cxx) if cxx else None,
        glibcxx_required=reqs["glibcxx"],
        cxxabi_required=reqs["cxxabi"],
        glibc_required=reqs["glibc"],
        libstdcxx_build=lib_desc,
    )
