"""Host checks: does this machine have what the package was built for?

Compatibility rules (docs/probe.md repeats them):
- GPU arch: a SASS image for sm_XY runs on a device of the same major and minor >= Y; an
  arch-specific image (sm_90a) only on exactly that arch. Every kernel needs one runnable image.
- Driver: the driver's CUDA version must be >= the host torch's CUDA runtime, and >= the build's.
- torch: exact = same version string; compatible = same major.minor (a different local build tag
  or patch: info); different minor releases = version skew, judged by the table of pairs that
  were run (host/skew.py: seen to pass = info, never run = warning, seen to fail = error).
- CPU ISA: every feature the native code was compiled to use must be in /proc/cpuinfo (else SIGILL).
- C++ runtime: the libstdc++ the process maps must define the .so's highest GLIBCXX/CXXABI
  version, and the C library its highest GLIBC version.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime_probe.formats import elf as _elf
from runtime_probe.host import cpu as _cpu
from runtime_probe.host.skew import skew_finding, torch_to_install, torch_wanted
from runtime_probe.package.manifest import Manifest
from runtime_probe.reporting.findings import Finding, error, info, warning

__all__ = ["Requirements", "arch_runs_on", "check_host", "compare_torch", "parent_facts", "parse_device"]

PHASE = "host"


@dataclass(frozen=True)
class Requirements:
    """What the package needs, from its manifest or (plain packages) from the archive itself."""

    device_type: str
    kernel_archs: tuple[str, ...] = ()
    compute_capability: str | None = None
    cuda_archs: tuple[str, ...] = ()  # the build's checked --cuda-arch list ("80", "90"), manifest 1.2
    ptx_archs: tuple[str, ...] = ()  # compute capabilities of the PTX in the kernel images ("80")
    cpu_isa: tuple[str, ...] = ()
    glibcxx: str | None = None
    cxxabi: str | None = None
    glibc: str | None = None
    torch: str | None = None
    triton: str | None = None
    cuda_runtime: str | None = None
    platform: str | None = None
    machine: str | None = None
    constants_bytes: int = 0

    @classmethod
    def from_manifest(cls, m: Manifest) -> Requirements:
        return cls(
            device_type=m.target.device_type,
            kernel_archs=m.target.kernel_archs,
            compute_capability=m.target.compute_capability,
            cuda_archs=m.target.cuda_archs or (),
            ptx_archs=tuple(
                sorted({re.sub(r"^ptx:(sm_|compute_)?", "", a) for k in m.target.kernels for a in k.archs if a.startswith("ptx:")})
            ),
            cpu_isa=m.target.cpu_isa,
            glibcxx=m.toolchain.glibcxx_required,
            cxxabi=m.toolchain.cxxabi_required,
            glibc=m.toolchain.glibc_required,
            torch=m.toolchain.torch,
            triton=m.toolchain.triton,
            cuda_runtime=m.toolchain.cuda_runtime,
            platform=m.target.platform,
            machine=m.target.machine,
            constants_bytes=sum(c.nbytes for c in m.constants if c.storage == "package"),
        )


def parse_device(device: str) -> tuple[str, int | None]:
    """'cuda:1' -> ('cuda', 1); 'cpu' -> ('cpu', None). Raises ValueError for anything else."""
    m = re.match(r"^(cpu|cuda)(?::(\d+))?$", device)
    if not m or (m.group(1) == "cpu" and m.group(2)):
        raise ValueError(device)
    return m.group(1), int(m.group(2)) if m.group(2) is not None else None


def parent_facts() -> dict[str, Any]:
    """Facts readable without torch, in the probe's own process."""
    libc = None
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        libc = None
    flags = _cpu.cpu_flags()
    return {
        "platform": platform.system().lower(),
        "machine": platform.machine(),
        "cpu": _cpu.cpu_model(),
        "cpu_flags": sorted(flags) if flags is not None else None,
        "libc": libc,
        "mem_available": _mem_available(),
        "hostname": platform.node(),
    }


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def arch_runs_on(arch: str, capability: str) -> bool:
    """Can a SASS image for ``arch`` ('sm_90a', 'sm_86') run on a device of ``capability`` ('90')?"""
    m = re.match(r"^sm_(\d+?)(\d)([af]?)$", arch)
    c = re.match(r"^(\d+?)(\d)$", capability)
    if not m or not c:
        return False
    a_major, a_minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
    d_major, d_minor = int(c.group(1)), int(c.group(2))
    if suffix == "a":
        return (a_major, a_minor) == (d_major, d_minor)
    return a_major == d_major and d_minor >= a_minor


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+", 1)[0])[:3])


def compare_torch(build: str, host: str) -> str:
    """'exact' | 'compatible' | 'newer' | 'older' (see the module docstring)."""
    if build == host:
        return "exact"
    b, h = _vtuple(build)[:2], _vtuple(host)[:2]
    if b == h:
        return "compatible"
    return "newer" if h > b else "older"


def _glibc_tuple(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    nums = re.findall(r"\d+", text)
    return tuple(int(n) for n in nums) if nums else None


def libstdcxx_provides(path: str | None) -> tuple[str, ...] | None:
    if not path:
        return None
    try:
        return _elf.parse_elf_file(path).version_defs
    except (OSError, _elf.ElfError):
        return None


def check_host(
    req: Requirements, parent: Mapping[str, Any], child: Mapping[str, Any], device_type: str, device_index: int | None
) -> tuple[list[Finding], bool]:
    """Findings about this host; the flag says whether loading is still worth trying."""
    findings: list[Finding] = []
    fatal = False
    platform_differs = bool(req.platform and parent.get("platform") and req.platform != parent["platform"])
    machine_differs = bool(req.machine and parent.get("machine") and req.machine != parent["machine"])
    if platform_differs or machine_differs:
        findings.append(
            error(
                "env.platform_mismatch",
                PHASE,
                "the package was built for another platform",
                expected=f"{req.platform}/{req.machine}",
                found=f"{parent.get('platform')}/{parent.get('machine')}",
                hint="build the package on (or for) this platform",
            )
        )
        fatal = True
    if "torch" not in child:
        findings.append(
            error(
                "env.torch_missing",
                PHASE,
                "torch cannot be imported by this Python",
                expected="torch" + (f" {torch_wanted(req.torch, req.device_type)}" if req.torch else ""),
                found=str(child.get("torch_error", "no torch"))[:300],
                hint=f"install {torch_to_install(req.torch, req.device_type)}"
                + (f"; the child found torch at {child['torch_origin']}" if child.get("torch_origin") else ""),
                evidence={"torch_origin": child.get("torch_origin")} if child.get("torch_origin") else {},
            )
        )
        return findings, False
    if req.device_type != device_type:
        findings.append(
            error(
                "env.device_mismatch",
                PHASE,
                f"the package was compiled for {req.device_type}, not {device_type}",
                expected=req.device_type,
                found=device_type,
                hint=f"probe with --device {req.device_type}, or build a {device_type} package",
            )
        )
        fatal = True
    if device_type == "cuda":
        fatal |= _check_cuda(req, child, device_index, findings)
    fatal |= _check_cpu(req, parent, findings)
    fatal |= _check_cxx_runtime(req, parent, child, findings)
    _check_versions(req, child, findings)
    return findings, not fatal


def _listed(cap: str, archs: tuple[str, ...]) -> bool:
    return any(a.rstrip("af") == cap for a in archs)


def _arch_not_native(req: Requirements, cap: str, name: str, bad: list[str], findings: list[Finding]) -> bool:
    """Kernels with no SASS for this GPU. The build's --cuda-arch list (manifest 1.2) says which
    archs it was checked to cover: a listed arch covered by forward-compatible PTX loads (the driver
    JIT-compiles it: a warning, as at build time); an arch the list leaves out is named as such."""
    pretty = f"{cap[:-1]}.{cap[-1]}"
    jit = [p for p in req.ptx_archs if not p.endswith(("a", "f")) and p.isdigit() and int(p) <= int(cap)]
    if _listed(cap, req.cuda_archs) and jit:
        findings.append(
            warning(
                "env.arch_mismatch",
                PHASE,
                f"{name} (sm_{cap}) has no SASS in the package; the build listed it (--cuda-arch {','.join(req.cuda_archs)}) "
                f"and covers it with PTX (compute_{max(jit, key=int)}), which the driver JIT-compiles at first load",
                expected=", ".join(req.kernel_archs),
                found=f"sm_{cap}",
                hint=f"a slow first load and untuned kernels: build once on an sm_{cap} GPU for native code",
            )
        )
        return False
    listed = (
        f"; the build covered --cuda-arch {','.join(req.cuda_archs)} only" if req.cuda_archs and not _listed(cap, req.cuda_archs) else ""
    )
    findings.append(
        error(
            "env.arch_mismatch",
            PHASE,
            f"kernels compiled for {', '.join(bad)} cannot run on {name} (compute capability {pretty}){listed}",
            expected=", ".join(req.kernel_archs),
            found=f"sm_{cap}",
            hint=f"AOTI compiles for the build GPU only: rebuild the package on a sm_{cap} GPU",
            evidence={"cuda_archs": list(req.cuda_archs)} if req.cuda_archs else {},
        )
    )
    return True


def _check_cuda(req: Requirements, child: Mapping[str, Any], device_index: int | None, findings: list[Finding]) -> bool:
    dev = _cuda_device(child, device_index, findings)
    if dev is None:
        return True
    index = 0 if device_index is None else device_index
    fatal = _check_arch(req, dev, findings)
    fatal = _check_driver(req, child, findings) or fatal
    free = dev.get("free_memory")
    if isinstance(free, int) and req.constants_bytes and free < req.constants_bytes * 1.1:
        findings.append(
            error(
                "env.memory_insufficient",
                PHASE,
                f"cuda:{index} has {free / 2**20:.0f} MiB free; the package's constants alone need {req.constants_bytes / 2**20:.0f} MiB",
                expected=f">= {req.constants_bytes * 1.1 / 2**20:.0f} MiB free",
                found=f"{free / 2**20:.0f} MiB",
                hint="free GPU memory (other processes: nvidia-smi) or use a larger GPU",
            )
        )
        fatal = True
    return fatal


def _cuda_device(child: Mapping[str, Any], device_index: int | None, findings: list[Finding]) -> Mapping[str, Any] | None:
    """The child's facts of the device asked for, or None with the finding that says why there is none."""
    devices = child.get("devices") or []
    if not child.get("cuda_available") or not devices:
        why = child.get("cuda_error") or ("torch was built without CUDA" if not child.get("cuda_runtime") else "no CUDA device is visible")
        findings.append(
            error(
                "env.device_unavailable",
                PHASE,
                "the package needs a CUDA GPU and this host has none usable",
                expected="a CUDA device",
                found=str(why),
                hint="run the probe on the deployment GPU host (check CUDA_VISIBLE_DEVICES and the driver)",
            )
        )
        return None
    index = 0 if device_index is None else device_index
    if index >= len(devices):
        findings.append(
            error(
                "env.device_index_invalid",
                PHASE,
                f"cuda:{index} does not exist",
                expected=f"an index in 0..{len(devices) - 1}",
                found=str(index),
                hint="pick a visible device (nvidia-smi lists them; CUDA_VISIBLE_DEVICES renumbers)",
            )
        )
        return None
    dev: Mapping[str, Any] = devices[index]
    return dev


def _check_arch(req: Requirements, dev: Mapping[str, Any], findings: list[Finding]) -> bool:
    """The package's kernels (or, for an older manifest, its build GPU) against this device's
    compute capability; True when they cannot run here."""
    cap = str(dev.get("capability"))
    if req.kernel_archs:
        runnable = [a for a in req.kernel_archs if arch_runs_on(a, cap)]
        if len(runnable) < len(req.kernel_archs):
            return _arch_not_native(req, cap, str(dev.get("name")), [a for a in req.kernel_archs if a not in runnable], findings)
        return False
    if req.compute_capability and req.compute_capability != cap:
        findings.append(
            error(
                "env.arch_mismatch",
                PHASE,
                f"the package was built on a compute capability {req.compute_capability} GPU; this is {cap}",
                expected=req.compute_capability,
                found=cap,
                hint=f"rebuild the package on a sm_{cap} GPU",
            )
        )
        return True
    return False


def _check_driver(req: Requirements, child: Mapping[str, Any], findings: list[Finding]) -> bool:
    """The driver's CUDA version against this host's torch and the build's; True when too old."""
    fatal = False
    driver = (child.get("driver") or {}).get("cuda_version")
    for label, runtime in (("this host's torch", child.get("cuda_runtime")), ("the build", req.cuda_runtime)):
        if driver and runtime and _vtuple(driver)[:2] < _vtuple(runtime)[:2]:
            findings.append(
                error(
                    "env.driver_too_old",
                    PHASE,
                    f"the GPU driver supports CUDA {driver}, below the CUDA {runtime} of {label}",
                    expected=f"a driver for CUDA >= {runtime}",
                    found=f"CUDA {driver} (driver {(child.get('driver') or {}).get('version')})",
                    hint="upgrade the NVIDIA driver on this host",
                )
            )
            fatal = True
    return fatal


def _check_cpu(req: Requirements, parent: Mapping[str, Any], findings: list[Finding]) -> bool:
    flags = parent.get("cpu_flags")
    if flags is None or not req.cpu_isa:
        return False
    missing = sorted(set(req.cpu_isa) - set(flags))
    if missing:
        findings.append(
            error(
                "env.cpu_isa_missing",
                PHASE,
                f"this CPU lacks {', '.join(missing)}, which the package's native code was compiled to use",
                expected=", ".join(req.cpu_isa),
                found=f"{parent.get('cpu')} without {', '.join(missing)}",
                hint="the package would die with SIGILL: rebuild it on a CPU no newer than this one, or with an explicit older -march",
            )
        )
        return True
    return False


def _check_cxx_runtime(req: Requirements, parent: Mapping[str, Any], child: Mapping[str, Any], findings: list[Finding]) -> bool:
    fatal = False
    lib = child.get("libstdcxx")
    provided = libstdcxx_provides(lib)
    if provided is not None:
        for need in (req.glibcxx, req.cxxabi):
            if need and need not in provided:
                best = _elf.max_version(provided, need.split("_", 1)[0])
                findings.append(
                    error(
                        "env.libstdcxx_too_old",
                        PHASE,
                        f"the C++ runtime this process loads ({lib}) lacks {need}",
                        expected=need,
                        found=str(best),
                        hint="install a newer libstdc++ (the compiler's runtime), or build the package with an older compiler",
                    )
                )
                fatal = True
    libc = _glibc_tuple(parent.get("libc"))
    need_glibc = _glibc_tuple(req.glibc)
    if libc and need_glibc and libc < need_glibc:
        findings.append(
            error(
                "env.libstdcxx_too_old",
                PHASE,
                f"the C library ({parent.get('libc')}) is older than the .so needs",
                expected=str(req.glibc),
                found=str(parent.get("libc")),
                hint="use a newer base image / OS, or build on an older one",
            )
        )
        fatal = True
    return fatal


def _check_versions(req: Requirements, child: Mapping[str, Any], findings: list[Finding]) -> None:
    host = str(child.get("torch"))
    if req.torch:
        verdict = compare_torch(req.torch, host)
        if verdict in ("older", "newer"):
            skew = skew_finding(req.torch, host, req.device_type)
            if skew is not None:
                findings.append(skew)
        elif verdict == "compatible":
            findings.append(
                info(
                    "env.torch_mismatch",
                    PHASE,
                    f"torch {host} differs from the build's {req.torch} only in patch or build tag",
                    expected=req.torch,
                    found=host,
                )
            )
    if req.device_type == "cuda" and req.triton and child.get("triton") and req.triton != child.get("triton"):
        findings.append(
            info(
                "env.torch_mismatch",
                PHASE,
                f"triton {child.get('triton')} differs from the build's {req.triton} (kernels are precompiled; informational)",
                expected=req.triton,
                found=str(child.get("triton")),
            )
        )
