"""Which zoo models a call of limited time starts, and in what order (docs/zoo.md, "Build / bare,
measured fairly").

A call on the lent GPU machine has at most 10 minutes. A model's build / bare ratio is fair only
when its bare path and its build ran in the same call, beside the same other models: a bare path
measured in a call of 4 models and a build in a call of 8 differ by up to 20% for that reason
alone. So a series of calls for the ratio (``python -m zoo.parity --same-call``) starts a model
only when what it is expected to take (its steps in earlier runs) fits in the time left, longest
first, so that the long ones start with the call and the short ones fill the ends of the lanes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["STEPS", "expected_seconds", "longest_first"]

# The steps of one model (zoo.parity.run_model), and where their seconds are in a saved result.
STEPS = ("bare", "build", "probe", "guard")


def _step_seconds(result: Mapping[str, Any], step: str) -> float | None:
    s = result.get(step) or {}
    if not s.get("ok"):
        return None
    # the bare child's whole process (its wall time), not only the export + compile it is timed by
    value = s.get("wall_s") if step == "bare" else s.get("seconds")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def expected_seconds(
    runs: Iterable[Mapping[str, Any]], *, steps: Sequence[str] = STEPS, bare_share: float = 0.8, paired: bool = False
) -> dict[str, float]:
    """Per model, the seconds of its ``steps`` in the latest of ``runs`` that had each one. A
    model whose bare path was never measured gets ``bare_share`` of its build (what the bare paths
    of the GPU runs took: 0.7 to 0.9 of the build's); a model without a measured build, none.
    ``paired``: the bare path runs beside the build (``zoo.parity --paired``), so the two take
    the longer of them, not their sum."""
    latest: dict[str, dict[str, float]] = {}
    for run in runs:
        for r in run.get("results", []):
            name = r.get("name")
            if not isinstance(name, str):
                continue
            for step in STEPS:
                seconds = _step_seconds(r, step)
                if seconds is not None:
                    latest.setdefault(name, {})[step] = seconds
    out: dict[str, float] = {}
    for name, seconds in latest.items():
        if "build" not in seconds:
            continue
        measured = {**seconds, "bare": seconds.get("bare", bare_share * seconds["build"])}
        total = sum(measured.get(step, 0.0) for step in steps)
        if paired and "bare" in steps:
            total -= min(measured["bare"], measured["build"])  # side by side: the longer of the two
        out[name] = round(total, 1)
    return out


def longest_first(names: Sequence[str], expected: Mapping[str, float]) -> list[str]:
    """``names`` by expected seconds, longest first; those without an estimate first of all (they
    may be the longest), in their given order."""
    unknown = [n for n in names if n not in expected]
    known = sorted((n for n in names if n in expected), key=lambda n: -expected[n])
    return unknown + known
