"""Reading AOTInductor's intermediate-value printer at level 2: which buffer first departs from
the build's non-finite baseline, and the kernel that wrote it. Pure functions over text.

At level 2 (``aot_inductor.debug_intermediate_value_printer="2"``) the twin's wrapper calls
``aoti_torch_print_tensor_handle`` on every tensor argument of every kernel, before and after its
launch, and on every graph input at entry (torch 2.11-2.15)::

    [  aoti_model_inputs - arg7_1  ]:
    [  after_launch - cpp_fused_add_mul_sqrt_2 - buf7  ]:
    Number of elements: 192
    Dtype: float32
    Mean value: -nan
    Min value: -nan
    Max value: -nan
    ...

``min``/``max`` propagate NaN, so the three kinds are read without stopping the run: NaN where
min or max is NaN, -inf where min is -inf, +inf where max is +inf. A small tensor's values come
before the statistics; only the statistics are read. ``before_launch`` prints are not read for
values: an output buffer holds whatever its memory held before the kernel wrote it.

A buffer that ``aoti_torch_check_inf_and_nan`` (``nan_asserts``) would stop at because it holds
-inf by design (an additive attention mask) is in the build's baseline (``baseline``), so
``first_departure`` goes past it to the first NaN, or the first Inf where the baseline had none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["BASELINE_VERSION", "KINDS", "Departure", "Print", "baseline", "first_departure", "parse_prints"]

KINDS = ("nan", "-inf", "+inf")
# The manifest's NonfiniteBaseline.version: bump when a recorded name or kind changes meaning
# (another printer format, another naming of the twin's buffers).
BASELINE_VERSION = 1
_HEADER = re.compile(r"^\[\s+(aoti_model_inputs|before_launch|after_launch) - (?:(\S+) - )?(\S+)\s+\]:\s*$")
_STAT = re.compile(r"^(Mean|Min|Max) value: (\S+)\s*$")


@dataclass(frozen=True)
class Print:
    """One ``aoti_torch_print_tensor_handle`` block."""

    when: str  # "input" | "before" | "after"
    kernel: str | None  # None for a graph input
    name: str  # the wrapper's name: buf7, arg7_1
    kinds: frozenset[str]  # of KINDS, read off min/max (empty: finite, or no statistics printed)
    input_index: int | None = None  # the graph input's position, for "input" prints


def _kinds(stats: Mapping[str, str]) -> frozenset[str]:
    values = {}
    for key, text in stats.items():
        try:
            values[key] = float(text)
        except ValueError:  # a complex tensor's mean "(1,2)": no min/max either
            continue
    lo, hi = values.get("Min"), values.get("Max")
    found = set()
    if (lo is not None and math.isnan(lo)) or (hi is not None and math.isnan(hi)):
        found.add("nan")
    else:
        if lo == -math.inf:
            found.add("-inf")
        if hi == math.inf:
            found.add("+inf")
    return frozenset(found)


def parse_prints(stdout: str) -> list[Print]:
    """Every printer block in ``stdout``, in order (other lines are skipped)."""
    prints: list[Print] = []
    head: tuple[str, str | None, str] | None = None
    stats: dict[str, str] = {}
    inputs = 0

    def close() -> None:
        nonlocal inputs
        if head is None:
            return
        when, kernel, name = head
        index = None
        if when == "input":
            index, inputs = inputs, inputs + 1
        prints.append(Print(when, kernel, name, _kinds(stats), index))

    # On CUDA a scalar kernel argument prints as ``[  after_launch - K - 192L: 192  ]\\n`` with a
    # literal backslash-n and no newline, so the next block's header follows on the same line
    # (seen on the H100, torch 2.11: tests/unit/data/printer/cuda_masked_nan_bad.stdout).
    for line in stdout.replace("\\n", "\n").splitlines():
        m = _HEADER.match(line.strip())
        if m:
            close()
            when = {"aoti_model_inputs": "input", "before_launch": "before", "after_launch": "after"}[m.group(1)]
            head, stats = (when, m.group(2) if when != "input" else None, m.group(3)), {}
            continue
        s = _STAT.match(line.strip())
        if s and head is not None:
            stats[s.group(1)] = s.group(2)
    close()
    return prints


def _valued(prints: Iterable[Print]) -> list[Print]:
    return [p for p in prints if p.when in ("input", "after")]


def baseline(runs: Iterable[Sequence[Print]]) -> dict[str, list[str]]:
    """The non-finite kinds each name holds on any of ``runs`` (the golden samples at build time):
    the names that hold none are left out, so a model without an Inf by design records ``{}``."""
    seen: dict[str, set[str]] = {}
    for prints in runs:
        for p in _valued(prints):
            if p.kinds:
                seen.setdefault(p.name, set()).update(p.kinds)
    return {name: sorted(kinds) for name, kinds in sorted(seen.items())}


@dataclass(frozen=True)
class Departure:
    """The first value the baseline does not explain."""

    name: str
    kernel: str | None  # None: a graph input held it on entry
    kinds: tuple[str, ...]  # the kinds outside the baseline ("nan" first)
    input_index: int | None
    expected: tuple[str, ...]  # what the baseline allows for this name

    @property
    def kind(self) -> str:
        """'NaN' or 'Inf' (with its sign), the one a message leads with."""
        return "NaN" if "nan" in self.kinds else " and ".join(k.replace("inf", "Inf") for k in self.kinds)


def first_departure(prints: Sequence[Print], allowed: Mapping[str, Sequence[str]]) -> Departure | None:
    """The earliest graph input or kernel output holding a kind its name does not hold in
    ``allowed`` (the baseline), and holding one in every later print of that name.

    The "every later print" rule drops a buffer printed before it is whole: a concatenation's
    output is written by several kernels, and the first one's print shows memory the others have
    not written yet."""
    valued = _valued(prints)

    def extra(p: Print) -> frozenset[str]:
        return p.kinds - frozenset(allowed.get(p.name, ()))

    last_clean = {p.name: i for i, p in enumerate(valued) if not extra(p)}
    for i, p in enumerate(valued):
        new = extra(p)
        if not new or last_clean.get(p.name, -1) > i:
            continue
        ordered = tuple(k for k in KINDS if k in new)
        return Departure(p.name, p.kernel, ordered, p.input_index, tuple(allowed.get(p.name, ())))
    return None
