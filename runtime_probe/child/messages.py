"""What a failing run prints without any tool: CUDA error messages and AOTI's input check.

Pure functions over text, unit-tested on recorded output. The failure table (``child.failures``)
reads them for every child's failure, and the escalation ladder (``ladder/``) for its rungs, so they
live here, below both; the readers of the ladder's own tools (kernel printer, compute-sanitizer,
debugger) stay in ``ladder/readers.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["InputCheck", "cuda_error", "input_check"]

_CUDA_ERRORS = [
    # First: a device assert's own text ("Assertion `index out of bounds: 0 <= tmp4 < 1000` failed")
    # says "out of bounds" too, but it is a checked index, not an illegal access.
    ("run.device_assert", re.compile(r"device-side assert triggered|cudaErrorAssert|Assertion .{0,300} failed|index out of bounds", re.I)),
    (
        "run.illegal_memory_access",
        re.compile(
            r"illegal memory access|cudaErrorIllegalAddress|operation not supported on global/shared address space|cudaErrorInvalidAddressSpace|misaligned address|cudaErrorMisalignedAddress|out of bounds",
            re.I,
        ),
    ),
    ("run.illegal_memory_access", re.compile(r"unspecified launch failure|cudaErrorLaunchFailure", re.I)),
    (
        "env.arch_mismatch",
        re.compile(
            r"no kernel image is available|cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU|device kernel image is invalid",
            re.I,
        ),
    ),
]


def cuda_error(text: str) -> tuple[str, str] | None:
    """(finding code, the matching line) for a CUDA failure message, or None."""
    for code, pattern in _CUDA_ERRORS:
        for line in text.splitlines():
            if pattern.search(line):
                clean = re.sub(r"^(what\(\):|Error:)\s*", "", line.strip())
                return code, clean[:400]
    return None


_INPUT_CHECK = re.compile(
    r"input_handles\[(\d+)\]: (unmatched dtype|unmatched dim value at (\d+)|dim value is too large at (\d+)|dim value is too small at (\d+)|unmatched stride value at (\d+)|unmatched device type)[^\n]*"
)
_INPUT_CODES = {
    "unmatched dtype": "input.dtype",
    "unmatched dim value at": "input.shape",
    "dim value is too large at": "input.range",
    "dim value is too small at": "input.range",
    "unmatched stride value at": "input.stride",
    "unmatched device type": "input.device",
}


@dataclass(frozen=True)
class InputCheck:
    index: int  # AOTI's input position (input_handles[i])
    code: str
    dim: int | None
    line: str


def input_check(stderr: str) -> InputCheck | None:
    """AOTI's own input check (AOTI_RUNTIME_CHECK_INPUTS), which names inputs by position only."""
    m = _INPUT_CHECK.search(stderr)
    if not m:
        return None
    kind = next(k for k in _INPUT_CODES if m.group(2).startswith(k))
    dims = [g for g in m.group(3, 4, 5, 6) if g is not None]
    return InputCheck(int(m.group(1)), _INPUT_CODES[kind], int(dims[0]) if dims else None, m.group(0).strip())
