"""The build's tolerance for compiled vs eager, decided once.

``--atol``/``--rtol`` (``BuildOptions.atol``/``rtol``; None: by dtype) become one ``ToleranceRule``
when the build's state is made (``BuildState.tolerance``), and every reader takes that object:
validation's comparison and the tolerances it records in the manifest (compare.py), the
eager-repeat check and the stage bisection (stages.py), the standalone repro's table (repro.py) and
the ONNX Runtime verdict (verdict.py). ``resolve`` is the one function that falls back to a dtype's
default; tests/unit/test_tolerance.py fails on a default taken anywhere else.

Not this module's: the tolerance a package STORES for the probe, which is measured from the
build's own differences (builder/golden.py's rule: the dtype's floors and 4x the excess).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from runtime_probe.package.manifest import CheckTolerance
from runtime_probe.reporting.errors import UsageError

if TYPE_CHECKING:
    from aoti_guard.builder.options import BuildOptions

__all__ = ["BUILD_TOLERANCE", "CheckTolerance", "ToleranceRule", "check_given", "resolve"]

# What compiled vs eager must satisfy at build time, per dtype (Inductor's own tests use similar
# bounds). A dtype not listed (integers, bools, complex) has no default: compared exactly.
BUILD_TOLERANCE: Mapping[str, tuple[float, float]] = MappingProxyType(
    {"float64": (1e-6, 1e-6), "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}
)
# The name the repro's table gives every dtype without a default of its own.
OTHER = "other dtypes"


def dtype_name(dtype: Any) -> str:
    """``torch.float32`` or ``"float32"`` -> ``"float32"``."""
    return str(dtype).replace("torch.", "")


def resolve(atol: float | None, rtol: float | None, dtype: Any) -> CheckTolerance:
    """THE decision: the given atol/rtol, else the dtype's default, with where each came from."""
    name = dtype_name(dtype)
    default = BUILD_TOLERANCE.get(name)
    d_atol, d_rtol = default if default is not None else (0.0, 0.0)
    fallback = f"{name} default" if default is not None else f"exact: no default for {name}"
    if atol is not None and rtol is not None:
        origin = "--atol/--rtol"
    elif atol is not None:
        origin = f"--atol; rtol: {fallback}"
    elif rtol is not None:
        origin = f"--rtol; atol: {fallback}"
    else:
        origin = fallback
    return CheckTolerance(
        float(atol) if atol is not None else d_atol,
        float(rtol) if rtol is not None else d_rtol,
        origin,
    )


def check_given(value: Any, flag: str) -> None:
    """Raise UsageError unless ``value`` is None or a finite number >= 0 (the CLI's FloatRange
    already refuses a negative one; the library's BuildOptions does not)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UsageError(
            f"{flag} {value!r} is not a tolerance",
            hint=f"give {flag} a finite number >= 0, or leave it out for the dtype's default (float32: 1e-4)",
        )


@dataclass(frozen=True)
class ToleranceRule:
    """The user's atol/rtol (None: by dtype), carried from the options to every comparison."""

    atol: float | None = None
    rtol: float | None = None

    @classmethod
    def from_options(cls, options: BuildOptions) -> ToleranceRule:
        """The options' atol/rtol (pipeline.check_options has refused bad ones: check_given)."""
        return cls(options.atol, options.rtol)

    def for_dtype(self, dtype: Any) -> CheckTolerance:
        """The tolerance an output of ``dtype`` (a torch dtype or its name) is judged by."""
        return resolve(self.atol, self.rtol, dtype)

    def table(self) -> dict[str, tuple[float, float]]:
        """dtype -> (atol, rtol) for every dtype with a default, and ``OTHER`` for the rest: what a
        script without aoti-guard (repro.py) needs to judge as the build did."""
        out = {name: self._pair(name) for name in BUILD_TOLERANCE}
        out[OTHER] = self._pair(OTHER)
        return out

    def _pair(self, dtype: str) -> tuple[float, float]:
        t = self.for_dtype(dtype)
        return (t.atol, t.rtol)
