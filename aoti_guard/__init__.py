"""aoti-guard: build, validate, probe and inspect PyTorch AOTInductor packages.

The build side and the CLI. The target side (probe, guarded loader) is ``runtime_probe``, which
this package imports and which never imports this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aoti_guard.spec import BuildSpec
from runtime_probe._version import __version__

if TYPE_CHECKING:
    from aoti_guard.builder.pipeline import BuildOptions, build

__all__ = ["BuildOptions", "BuildSpec", "__version__", "build"]


def __getattr__(name: str) -> Any:
    # The build side loads on first use, so `aoti-guard --help`, `probe` and `inspect` do not pay
    # for it (PEP 562).
    if name in ("BuildOptions", "build"):
        from aoti_guard.builder import pipeline as builder

        return getattr(builder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
