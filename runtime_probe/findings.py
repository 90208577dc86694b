"""Findings: what a check found, as data. Every code the tool can emit is registered here.

Codes are a public contract (scripts match on them): add new ones, never rename or reuse one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CODES", "Finding", "Severity", "has_errors", "worst"]


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


# code -> one line saying what it means. docs/findings.md is generated from this table.
CODES: dict[str, str] = {
    # archive: before any native code is opened
    "archive.unreadable": "The file is not a readable zip archive (truncated, not a zip, unreadable).",
    "archive.unsafe_entry": "An entry escapes the archive root (.., absolute path, symlink, other root) or is a duplicate.",
    "archive.too_large": "An entry or the whole archive is larger than allowed (zip bomb guard).",
    "archive.hash_mismatch": "An entry's SHA-256 differs from the manifest, or an entry is missing or unlisted.",
    "archive.signature_missing": "A public key was given but the package carries no signature.",
    "archive.signature_invalid": "The manifest signature does not verify with the given public key.",
    "archive.signature_unchecked": "The package is signed but no public key was given, so the signature was not checked.",
    "archive.ambiguous": "The zip's byte layout is ambiguous (prepended or trailing bytes, overlapping entries, headers that disagree).",
    "archive.no_model": "The archive holds no AOTInductor model under data/aotinductor/.",
    # manifest
    "manifest.missing": "No aoti-guard manifest: a plain AOTI package; only generic checks can run.",
    "manifest.invalid": "The manifest is not valid JSON of the expected shape.",
    "manifest.unsupported_version": "The manifest's schema major version is newer than this reader.",
    # env: the host
    "env.device_unavailable": "The device type the package needs is not present on this host.",
    "env.device_index_invalid": "The requested device index does not exist on this host.",
    "env.device_mismatch": "The requested device type differs from the one the package was compiled for.",
    "env.arch_mismatch": "The GPU's compute capability does not match the archs of the package's kernels.",
    "env.driver_too_old": "The GPU driver is older than the CUDA runtime needs.",
    "env.torch_mismatch": "The host's torch (or triton) differs from the build's.",
    "env.torch_missing": "torch cannot be imported on this host.",
    "env.cpu_isa_missing": "The CPU lacks instruction-set features the package's native code was compiled for.",
    "env.libstdcxx_too_old": "The C++ runtime (libstdc++) or C library lacks symbol versions the .so needs.",
    "env.memory_insufficient": "Free device memory is below what the package's constants need.",
    "env.platform_mismatch": "The package was built for another OS or machine architecture.",
    # load: dlopen + model creation in a child
    "load.crash": "The child process died (signal) while loading the package.",
    "load.error": "Loading the package raised an error.",
    "load.timeout": "Loading the package did not finish within the timeout.",
    # constants (weights)
    "constants.missing": "A constant the model needs is absent (from the package or the weights file).",
    "constants.unexpected": "A constant is present that the model does not have.",
    "constants.shape_mismatch": "A constant's shape differs from the contract.",
    "constants.dtype_mismatch": "A constant's dtype differs from the contract.",
    "constants.device_mismatch": "A constant is on another device than the model.",
    "constants.unreadable": "The weights file cannot be read (truncated, lying header, not safetensors).",
    # inputs (guarded loader and probe)
    "input.count": "Too few or too many arguments, or an unknown or missing keyword argument.",
    "input.type": "An argument is not a tensor where a tensor is expected (or the reverse).",
    "input.dtype": "An argument's dtype differs from the contract.",
    "input.shape": "An argument's rank or static size differs from the contract.",
    "input.range": "A dynamic size is outside its range, or sizes that share a symbol differ.",
    "input.stride": "An argument's strides (layout) differ from what was compiled for.",
    "input.device": "An argument is on another device than the model.",
    "input.value": "A non-tensor argument differs from the value the model was specialized for.",
    # run
    "run.crash": "The child process died (signal) while running the model.",
    "run.error": "Running the model raised an error.",
    "run.timeout": "Running the model did not finish within the timeout.",
    "run.nonfinite": "An output holds NaN or Inf.",
    "run.illegal_memory_access": "A kernel made an illegal memory access.",
    "run.device_assert": "A device-side assertion fired.",
    # golden
    "golden.mismatch": "An output differs from the recorded reference beyond its tolerance.",
    "golden.missing": "The package has no golden samples to check against.",
    # build
    "build.usage": "The build target or its options are not usable.",
    "build.factory_failed": "The model factory raised or returned something unusable.",
    "build.export_failed": "torch.export could not export the model.",
    "build.compile_failed": "AOTInductor could not compile the model.",
    "build.eager_failed": "The eager model raised on a golden sample.",
    "build.validation_failed": "A compiled output differs from the eager reference beyond tolerance.",
    "build.nonfinite": "An output holds NaN or Inf on a golden sample.",
    "build.fp64_reference_skipped": "No float64 reference could be computed for this model.",
    "build.sample_dropped": "A generated golden sample was not kept (size cap, or eager rejected it).",
    "build.package_failed": "Writing the package failed.",
    "build.twin_failed": "The debug twin could not be compiled; the release package is still valid.",
    "build.sign_failed": "The package could not be signed; it was not written.",
}


@dataclass(frozen=True)
class Finding:
    """One result of a check. ``evidence`` holds machine-readable facts (kernel, signal, frames...)."""

    code: str
    severity: Severity
    phase: str
    message: str
    expected: str | None = None
    found: str | None = None
    hint: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            # A typo in a code would silently break every script matching on it.
            raise ValueError(f"unregistered finding code {self.code!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity.value,
            "phase": self.phase,
            "message": self.message,
            "expected": self.expected,
            "found": self.found,
            "hint": self.hint,
        }
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            code=str(data["code"]),
            severity=Severity(data["severity"]),
            phase=str(data["phase"]),
            message=str(data["message"]),
            expected=_opt_str(data.get("expected")),
            found=_opt_str(data.get("found")),
            hint=_opt_str(data.get("hint")),
            evidence=dict(data.get("evidence") or {}),
        )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def error(code: str, phase: str, message: str, **kw: Any) -> Finding:
    return Finding(code, Severity.ERROR, phase, message, **kw)


def warning(code: str, phase: str, message: str, **kw: Any) -> Finding:
    return Finding(code, Severity.WARNING, phase, message, **kw)


def info(code: str, phase: str, message: str, **kw: Any) -> Finding:
    return Finding(code, Severity.INFO, phase, message, **kw)


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity is Severity.ERROR for f in findings)


def worst(findings: Iterable[Finding]) -> Severity | None:
    order = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
    result: Severity | None = None
    for f in findings:
        if result is None or order[f.severity] > order[result]:
            result = f.severity
    return result
