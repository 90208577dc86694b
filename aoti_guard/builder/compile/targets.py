"""Prevent, not only detect: the CPU ISA and the CUDA archs a package is built for.

CPU (``--cpu-isa``). An AOTI CPU build has two ISA knobs (docs/probe.md, "Build targets"): the
compiler's ``-march`` for the whole .so (Inductor's ``cpp.march``, default ``native``) and the
vector ISA of the generated kernels (``cpp.simdlen``). A portable build needs both: ``cpp.march``
alone still lets AVX-512 kernels in on an AVX-512 build host; ``cpp.simdlen`` alone still
compiles the wrapper (and the libstdc++ code inlined in it) with ``-march=native``. After the
compile the .so is disassembled and any AVX-512/AMX instruction is reported: a ``native`` build
that uses them dies with SIGILL on hosts without them (pytorch#121516).

CUDA (``--cuda-arch``). Torch has no lever that compiles one AOTI package for several archs, nor
for another arch than the build GPU's: Triton targets the build GPU's capability, and Inductor
autotunes on it. So the list is checked, not obeyed: each listed arch must be covered by the
kernel images (SASS of that arch, or PTX of an older non-arch-specific one, which the driver
JIT-compiles; ``aot_inductor.emit_multi_arch_kernel`` keeps the PTX).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from runtime_probe.host.rules import arch_runs_on
from runtime_probe.package.manifest import Target
from runtime_probe.reporting.findings import Finding, error, warning

__all__ = [
    "CPU_ISA_LEVELS",
    "DEFAULT_CPU_ISA",
    "avx512_instructions",
    "check_cpu_isa",
    "check_cuda_archs",
    "cpu_isa_configs",
    "cuda_arch_configs",
    "default_cpu_isa",
    "parse_cuda_archs",
]

PHASE = "compile"

# level -> Inductor configs: the compiler's -march and the kernels' vector width (0 = scalar)
CPU_ISA_LEVELS: dict[str, dict[str, Any]] = {
    "native": {},
    "x86-64-v2": {"cpp.march": "x86-64-v2", "cpp.simdlen": 0},  # SSE4.2: Inductor has no 128-bit VecISA on x86
    "x86-64-v3": {"cpp.march": "x86-64-v3", "cpp.simdlen": 256},  # AVX2
    "x86-64-v4": {"cpp.march": "x86-64-v4", "cpp.simdlen": 512},  # AVX-512
}

# AVX-512: 512-bit registers, opmask registers, registers 16-31 (EVEX only), EVEX-only mnemonics; AMX tiles.
_AVX512 = re.compile(
    r"%zmm\d|%k[0-7]\b|\{%k[1-7]\}|%[xy]mm(1[6-9]|2\d|3[01])\b|\b(vpternlog|vpermt2|vpermi2|vrndscale|vscalef|vfpclass|vpcompress|vpexpand|kmov)"
)
_AMX = re.compile(r"\b(tdp\w+|tileloadd\w*|tilestored|ldtilecfg|tilezero)\b")


# The level a CPU build targets when --cpu-isa is not given: portable to every x86 server of the
# last decade (AVX2), where -march=native on an AVX-512 build host made every default build warn
# build.isa_beyond_baseline (and fail --strict). Chosen by measurement: on Inductor's generated
# code x86-64-v3 ran as fast as native on an AVX-512/AMX Xeon (bench/cpu_isa_cost.py,
# docs/benchmarks.md); --cpu-isa native or x86-64-v4 is the declared choice of a faster target.
DEFAULT_CPU_ISA = "x86-64-v3"


def default_cpu_isa(requested: str | None, has_config: Any) -> str | None:
    """``--cpu-isa`` as given; when not given, DEFAULT_CPU_ISA where this torch has its levers,
    else None (native: torch 2.11 hard-codes -march=native and has no cpp.march)."""
    if requested is not None:
        return requested
    return DEFAULT_CPU_ISA if all(has_config(k) for k in CPU_ISA_LEVELS[DEFAULT_CPU_ISA]) else None


def cpu_isa_configs(level: str, has_config: Any) -> dict[str, Any]:
    """The Inductor configs for ``level``; raises ValueError when this torch has no lever for it."""
    if level not in CPU_ISA_LEVELS:
        raise ValueError(f"--cpu-isa {level!r}: use one of {', '.join(CPU_ISA_LEVELS)}")
    configs = CPU_ISA_LEVELS[level]
    missing = [k for k in configs if not has_config(k)]
    if missing:
        raise ValueError(
            f"--cpu-isa {level}: this torch has no {', '.join(missing)} config (torch 2.11 hard-codes -march=native); "
            "build on a CPU no newer than the deployment hosts, or see docs/probe.md (Build targets) for the compiler shim"
        )
    return dict(configs)


def parse_cuda_archs(text: str) -> tuple[str, ...]:
    """ "8.0,9.0" -> ("80", "90"); raises ValueError for anything else."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)\.(\d)([af]?)|(\d{2,3})([af]?)", part)
        if m is None:
            raise ValueError(f"--cuda-arch {part!r}: write compute capabilities like 8.0,9.0")
        out.append(f"{m.group(1)}{m.group(2)}{m.group(3)}" if m.group(1) else f"{m.group(4)}{m.group(5)}")
    return tuple(out)


def cuda_arch_configs(archs: Sequence[str], build_cc: str | None) -> dict[str, Any]:
    """Keep the PTX (``emit_multi_arch_kernel``) when a listed arch is newer than the build GPU's:
    the driver can JIT it forward. Nothing can make code for an older arch."""
    if build_cc and any(_num(a) > _num(build_cc) for a in archs):
        return {"aot_inductor.emit_multi_arch_kernel": True}
    return {}


def _num(arch: str) -> int:
    return int(re.sub(r"\D", "", arch) or 0)


def _arch(a: str) -> str:
    """ "sm_90a" / "compute_80" / "ptx:sm_80" -> "90a" / "80"."""
    return re.sub(r"^(\w+:)?(sm_|compute_)?", "", a)


def check_cuda_archs(archs: Sequence[str], target: Target) -> list[Finding]:
    """An error for each listed arch no kernel image covers: SASS that runs on it (the probe's
    rule, ``host.rules.arch_runs_on``), else PTX of an older non-arch-specific capability (a
    warning: the driver JIT-compiles it at first load)."""
    sass = sorted(target.kernel_archs)
    ptx = sorted({_arch(a) for img in target.kernels for a in img.archs if a.startswith("ptx:")})
    findings = []
    for arch in archs:
        cap = arch.rstrip("af")
        if sass and all(arch_runs_on(a, cap) for a in sass):
            continue
        jit = [p for p in ptx if not p.endswith(("a", "f")) and _num(p) <= _num(arch)]
        if jit:
            findings.append(
                warning(
                    "build.arch_uncovered",
                    PHASE,
                    f"sm_{arch} has no SASS in the package; the driver will JIT-compile its PTX (compute_{max(jit, key=_num)}) at first load",
                    hint=f"slow first load and untuned kernels: build on an sm_{arch} GPU for native code",
                )
            )
            continue
        findings.append(
            error(
                "build.arch_uncovered",
                PHASE,
                f"--cuda-arch lists sm_{arch}, but the package's kernels are for {', '.join(sass) or 'no arch'}",
                expected=f"SASS that runs on sm_{arch}, or PTX of an older non-arch-specific compute capability",
                found=", ".join([*sass, *(f"ptx:{p}" for p in ptx)]) or "no kernel images",
                hint=f"torch compiles Triton kernels for the build GPU only (no multi-arch lever): build once on an sm_{arch} GPU",
                evidence={"requested": list(archs), "sass": sass, "ptx": ptx},
            )
        )
    return findings


def avx512_instructions(so_path: str) -> dict[str, int] | None:
    """Counts of AVX-512 / AMX instruction lines in the .so's code (objdump), or None without objdump."""
    tool = shutil.which("objdump")
    if tool is None:
        return None
    try:
        text = subprocess.run([tool, "-d", "--no-show-raw-insn", so_path], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {
        "avx512": sum(1 for line in text.splitlines() if _AVX512.search(line)),
        "amx": sum(1 for line in text.splitlines() if _AMX.search(line)),
    }


def check_cpu_isa(level: str | None, so_path: str, configs: Mapping[str, Any]) -> tuple[list[Finding], dict[str, Any]]:
    """Warn when the .so uses AVX-512/AMX and the build did not ask for x86-64-v4: the package dies
    with SIGILL (at load: the wrapper's own code) on hosts without them."""
    counts = avx512_instructions(so_path)
    detail: dict[str, Any] = {"cpu_isa": level or "native", "march": configs.get("cpp.march") or "native", "instructions": counts}
    if counts is None or level == "x86-64-v4" or not (counts["avx512"] or counts["amx"]):
        return [], detail
    used = ", ".join(f"{n} {k.upper()} instruction(s)" for k, n in counts.items() if n)
    finding = warning(
        "build.isa_beyond_baseline",
        PHASE,
        f"the package's .so uses {used}: it dies with SIGILL on any CPU without them (x86-64-v3 hosts, older or AMD CPUs)",
        expected="x86-64-v3 (AVX2) code, which every x86 server of the last decade runs",
        found=used,
        hint="build with --cpu-isa x86-64-v3 for a portable package, or --cpu-isa x86-64-v4 when every serving host has "
        "AVX-512; to see what AVX-512 buys, time both builds on a serving host with probe --iterations",
        evidence=detail,
    )
    return [finding], detail
