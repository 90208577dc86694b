"""aoti-guard: build, validate, probe and inspect PyTorch AOTInductor packages.

The build side and the CLI. The target side (probe, guarded loader) is ``runtime_probe``, which
this package imports and which never imports this one.
"""

from __future__ import annotations

from runtime_probe import __version__

from .builder import BuildOptions, build
from .spec import BuildSpec

__all__ = ["BuildOptions", "BuildSpec", "__version__", "build"]
