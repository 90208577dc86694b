"""runtime_probe: check an AOTInductor package on the host that will run it.

Importable with the standard library alone: torch is imported inside the functions that need it,
and click, onnx and docker are never imported. ``python -m runtime_probe PKG`` is the pre-flight
for serving containers; ``runtime_probe.load`` is the guarded loader.
"""

from __future__ import annotations

from runtime_probe._version import __version__
from runtime_probe.guard.load import GuardedModel, load
from runtime_probe.reporting.errors import (
    ConstantsContractError,
    GuardError,
    InputContractError,
    OutputContractError,
    PackageRejected,
    ToolError,
    UsageError,
)
from runtime_probe.reporting.findings import Finding, Severity
from runtime_probe.reporting.progress import Progress
from runtime_probe.reporting.report import Report

__all__ = [
    "ConstantsContractError",
    "Finding",
    "GuardError",
    "GuardedModel",
    "InputContractError",
    "OutputContractError",
    "PackageRejected",
    "Progress",
    "Report",
    "Severity",
    "ToolError",
    "UsageError",
    "__version__",
    "load",
]
