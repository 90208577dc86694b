"""CPU instruction-set features: what a compile command enabled vs what this CPU has.

CPU packages are compiled with ``-march=native`` (plus ``-mavx2 -mfma ...``), so the .so may use
any instruction of the build host's CPU; on a CPU without it the process dies with SIGILL. Names
here are the Linux /proc/cpuinfo flag names, the common currency of both sides.
"""

from __future__ import annotations

import platform

__all__ = ["MACRO_TO_FLAG", "MFLAG_TO_FLAG", "cpu_flags", "cpu_model", "flags_from_macros", "flags_from_mflags"]

# Predefined compiler macros (``g++ -march=native -dM -E``) -> cpuinfo flags.
MACRO_TO_FLAG = {
    "__SSE4_1__": "sse4_1",
    "__SSE4_2__": "sse4_2",
    "__SSE4A__": "sse4a",
    "__AVX__": "avx",
    "__AVX2__": "avx2",
    "__FMA__": "fma",
    "__F16C__": "f16c",
    "__BMI__": "bmi1",
    "__BMI2__": "bmi2",
    "__AVX512F__": "avx512f",
    "__AVX512BW__": "avx512bw",
    "__AVX512VL__": "avx512vl",
    "__AVX512DQ__": "avx512dq",
    "__AVX512CD__": "avx512cd",
    "__AVX512VNNI__": "avx512_vnni",
    "__AVX512BF16__": "avx512_bf16",
    "__AVX512FP16__": "avx512_fp16",
    "__AVX512VBMI__": "avx512vbmi",
    "__AVX512VBMI2__": "avx512_vbmi2",
    "__AVXVNNI__": "avx_vnni",
    "__AMX_TILE__": "amx_tile",
    "__AMX_BF16__": "amx_bf16",
    "__AMX_INT8__": "amx_int8",
}

MFLAG_TO_FLAG = {
    "-msse4.1": "sse4_1",
    "-msse4.2": "sse4_2",
    "-mavx": "avx",
    "-mavx2": "avx2",
    "-mfma": "fma",
    "-mf16c": "f16c",
    "-mbmi": "bmi1",
    "-mbmi2": "bmi2",
    "-mavx512f": "avx512f",
    "-mavx512bw": "avx512bw",
    "-mavx512vl": "avx512vl",
    "-mavx512dq": "avx512dq",
    "-mavx512cd": "avx512cd",
    "-mavx512vnni": "avx512_vnni",
    "-mavx512bf16": "avx512_bf16",
    "-mavx512fp16": "avx512_fp16",
    "-mavxvnni": "avx_vnni",
    "-mamx-tile": "amx_tile",
    "-mamx-bf16": "amx_bf16",
    "-mamx-int8": "amx_int8",
}


def flags_from_macros(macro_text: str) -> set[str]:
    found = set()
    for line in macro_text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "#define" and parts[1] in MACRO_TO_FLAG:
            found.add(MACRO_TO_FLAG[parts[1]])
    return found


def flags_from_mflags(mflags: tuple[str, ...] | list[str]) -> set[str]:
    return {MFLAG_TO_FLAG[m] for m in mflags if m in MFLAG_TO_FLAG}


def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> set[str] | None:
    """This CPU's feature flags, or None where they cannot be read (not Linux x86)."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def cpu_model(cpuinfo_path: str = "/proc/cpuinfo") -> str | None:
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return platform.processor() or None
