"""The values of the ``--inputs`` tensors that index a table, checked before any native code runs.

The manifest records, for each integer input that indexes a table (embedding, gather,
index_select, advanced indexing), the range of values it may hold (``TensorSpec.value_range``).
An id outside it is undefined behaviour in the compiled model (garbage, a SIGSEGV, or a
device-side assert that poisons the CUDA context), so the probe reads the values from the file
with the standard library and names the first one outside: ``ids holds 1000000000 at [2, 5];
the table has 1000 rows``.
"""

from __future__ import annotations

import array
import re
import sys

from runtime_probe.formats.safetensors import Header
from runtime_probe.package.manifest import InputSpec
from runtime_probe.reporting.findings import Finding, error

__all__ = ["first_out_of_range", "name_the_index", "value_range_findings"]

# Inductor's bounds assert: "index out of bounds: 0 <= tmp4 < 1000"
_BOUNDS = re.compile(r"(-?\d+)\s*<=\s*\w+\s*<\s*(\d+)")

# safetensors integer codes -> array typecodes of that size
_TYPECODES = {"I64": "q", "I32": "i", "I16": "h", "I8": "b", "U8": "B", "U16": "H", "U32": "I", "U64": "Q"}
_CHUNK = 1 << 20  # elements read at a time: a large file is scanned in bounded memory


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return list(reversed(index))


def first_out_of_range(path: str, header: Header, name: str, lo: int, hi: int) -> tuple[int, list[int]] | None:
    """(value, index) of the first element of tensor ``name`` outside [lo, hi], or None."""
    info = header.tensors[name]
    code = _TYPECODES.get(info.dtype)
    if code is None:
        return None
    itemsize = array.array(code).itemsize
    count = (info.end - info.begin) // itemsize
    with open(path, "rb") as fh:
        fh.seek(header.data_start + info.begin)
        done = 0
        while done < count:
            values = array.array(code)
            values.frombytes(fh.read(min(_CHUNK, count - done) * itemsize))
            if not values:
                return None
            if sys.byteorder != "little":
                values.byteswap()  # safetensors is little-endian
            for k, v in enumerate(values):
                if v < lo or v > hi:
                    return v, _unravel(done + k, info.shape)
            done += len(values)
    return None


def value_range_findings(path: str, header: Header, inputs: list[InputSpec], phase: str) -> list[Finding]:
    """An ``input.value_range`` error for each input holding a value outside its recorded range."""
    findings: list[Finding] = []
    for spec in inputs:
        vr = spec.tensor.value_range if spec.tensor is not None else None
        if vr is None or spec.name not in header.tensors:
            continue
        lo, hi = vr
        bad = first_out_of_range(path, header, spec.name, lo, hi)
        if bad is None:
            continue
        value, index = bad
        findings.append(
            error(
                "input.value_range",
                phase,
                f"{spec.name} holds {value} at {index}; the table has {hi + 1} rows",
                expected=f"values in [{lo}, {hi}]",
                found=str(value),
                hint="map ids outside the table (out-of-vocabulary tokens) to a valid one before the call; the compiled model does not check them",
                evidence={"argument": spec.name, "value": value, "index": index, "value_range": [lo, hi]},
            )
        )
    return findings


def name_the_index(line: str, path: str, header: Header, inputs: list[InputSpec]) -> str | None:
    """For a device assert on the table bounds (``0 <= tmp4 < 1000``), the integer input of the
    --inputs file that holds a value outside them: ``ids holds 1000000000 at [2, 5]; the table has
    1000 rows``. None when the line has no bounds or no input holds such a value."""
    m = _BOUNDS.search(line)
    if m is None:
        return None
    lo, rows = int(m.group(1)), int(m.group(2))
    for spec in inputs:
        if spec.tensor is None or spec.name not in header.tensors or header.tensors[spec.name].dtype not in _TYPECODES:
            continue
        bad = first_out_of_range(path, header, spec.name, lo, rows - 1)
        if bad is not None:
            return f"{spec.name} holds {bad[0]} at {bad[1]}; the table has {rows} rows"
    return None
