"""runtime_probe: check an AOTInductor package on the host that will run it.

Importable with the standard library alone: torch is imported inside the functions that need it,
and click, onnx and docker are never imported. ``python -m runtime_probe PKG`` is the pre-flight
for serving containers; ``runtime_probe.load`` is the guarded loader.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import ConstantsContractError, GuardError, InputContractError, PackageRejected, ToolError, UsageError
from .findings import Finding, Severity
from .guard import GuardedModel, load
from .report import Report

__all__ = [
    "ConstantsContractError",
    "Finding",
    "GuardError",
    "GuardedModel",
    "InputContractError",
    "PackageRejected",
    "Report",
    "Severity",
    "ToolError",
    "UsageError",
    "__version__",
    "load",
]
