"""Version skew: the build's torch (the manifest's ``toolchain.torch``) against the host's, by a
table of the pairs that were actually run.

A package's .so is compiled from the build's torch headers and calls the host's libtorch through
AOTI's C shim, so a build and a host of different minor releases is a pair that works or not as
a fact, not by a rule of thumb. ``SKEW`` keeps those facts: each row is a (build, host, device
type) pair, whether the package loaded and passed its golden samples there, and the run that
showed it. The probe says:

- a pair seen to load and pass: ``env.torch_skew_seen`` (info, naming the run);
- a pair never run: ``env.torch_skew_unseen`` (warning: the probe's own load and golden phases
  are then the evidence);
- a pair seen to fail: ``env.torch_skew_fails`` (error, with what failed).

Only same-minor differences (patch, local tag) stay ``env.torch_mismatch`` (info). Add a row only
from a run that was made (docs/compat.md says how), never from a version rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime_probe.reporting.findings import Finding, error, info, warning

__all__ = ["SKEW", "SkewRow", "minor", "skew_finding", "torch_to_install", "torch_wanted"]

PHASE = "host"


@dataclass(frozen=True)
class SkewRow:
    build: str  # "2.13": the build's torch, major.minor
    host: str  # the host's torch, major.minor
    device: str  # "cpu" | "cuda"
    passed: bool  # loaded and passed its golden samples (False: what failed is in ``evidence``)
    evidence: str  # the run that showed it


_CPU_RUN = (
    "issue 27, CPU, torch 2.13.0+cpu and 2.15.0+cu132 (run on CPU): aoti-guard build of the example model and of a "
    "model with embedding, conv1d, batch norm, layer norm, GELU, SDPA, softmax and cumsum (dynamic batch, a debug twin "
    "sharing the release weights) on one version; probe (load, constants, golden: all samples) and runtime_probe.load "
    "(release model and debug twin, one call each) on the other"
)

SKEW: tuple[SkewRow, ...] = (
    SkewRow("2.13", "2.15", "cpu", True, _CPU_RUN),
    SkewRow("2.15", "2.13", "cpu", True, _CPU_RUN),
)


def minor(version: str) -> str | None:
    """``"2.15.0+cu132"`` -> ``"2.15"``; None for a version without two numbers."""
    nums = re.findall(r"\d+", version.split("+", 1)[0])
    return f"{nums[0]}.{nums[1]}" if len(nums) >= 2 else None


def torch_wanted(version: str, device_type: str) -> str:
    """The torch a host needs for a package built with torch ``version`` for ``device_type``: the
    build's release; for a CPU package without the build's local tag (a CUDA wheel's ``+cu132``
    names a CUDA runtime that a CPU package never calls), for a CUDA package with it."""
    return version if device_type == "cuda" else version.split("+", 1)[0]


def torch_to_install(version: str | None, device_type: str) -> str:
    """``torch_wanted`` in words, naming the wheel: the CPU one for a CPU package (whatever wheel
    the build ran on: issue 44, a CPU package built on a 2.15 CUDA wheel was told to install the
    CUDA wheel), the build's CUDA one for a CUDA package."""
    if not version:
        return "torch (the package names no torch version)"
    wanted = torch_wanted(version, device_type)
    local = version.partition("+")[2]
    if device_type == "cuda":
        cuda = re.fullmatch(r"cu(\d+)(\d)", local)
        return f"torch {wanted}, the CUDA {cuda[1]}.{cuda[2]} wheel the package was built with" if cuda else f"torch {wanted} with CUDA"
    built_on = f"; the build ran on {version}, a CUDA wheel, which a CPU package does not need" if local.startswith("cu") else ""
    return f"torch {wanted}, the CPU wheel ({wanted}+cpu){built_on}"


def skew_finding(build: str, host: str, device_type: str, table: tuple[SkewRow, ...] = SKEW) -> Finding | None:
    """The finding for a build's and a host's torch of different minor releases (None when they
    share one: not skew). ``table``: the rows to judge by (tests pass their own)."""
    b, h = minor(build), minor(host)
    if b is None or h is None or b == h:
        return None
    row = next((r for r in table if (r.build, r.host, r.device) == (b, h, device_type)), None)
    pair = f"built with torch {build}, loaded with torch {host} on {device_type}"
    if row is None:
        seen = sorted({f"{r.build} -> {r.host}" for r in table if r.device == device_type and r.passed})
        return warning(
            "env.torch_skew_unseen",
            PHASE,
            f"{pair}: this pair of torch releases was never run (docs/compat.md), so nothing vouches for it but this probe",
            expected=f"torch {b} (the build's), or a pair seen to work on {device_type}: {', '.join(seen) or 'none'}",
            found=host,
            hint=f"trust the load and golden phases below; for a release, probe on torch {b} or add the pair to the CI's runs",
            evidence={"build_torch": build, "host_torch": host, "device": device_type},
        )
    if row.passed:
        return info(
            "env.torch_skew_seen",
            PHASE,
            f"{pair}: a pair seen to load and pass ({row.evidence})",
            expected=build,
            found=host,
            evidence={"build_torch": build, "host_torch": host, "device": device_type, "run": row.evidence},
        )
    return error(
        "env.torch_skew_fails",
        PHASE,
        f"{pair}: a pair known to fail ({row.evidence})",
        expected=f"torch {b} (the build's)",
        found=host,
        hint=f"install torch {b} here, or rebuild the package with torch {h}",
        evidence={"build_torch": build, "host_torch": host, "device": device_type, "run": row.evidence},
    )
