"""Latency statistics for ``probe --iterations/--duration`` (trtexec's summary), standard library only.

A percentile is reported only when the run has enough calls for it to be more than the maximum:
pXX needs at least ``100 / (100 - XX)`` calls (p50: 2, p90: 10, p95: 20, p99: 100); the ones left
out are named in ``omitted``. Percentiles interpolate linearly between the sorted times (numpy's
default). ``cv`` is the coefficient of variation (sample standard deviation / mean): above
``CV_WARN`` the timings vary too much to compare two runs, and ``unstable`` says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["CV_WARN", "PERCENTILES", "percentile", "summarize", "unstable_message"]

PERCENTILES: tuple[tuple[str, float, int], ...] = (("p50", 0.50, 2), ("p90", 0.90, 10), ("p95", 0.95, 20), ("p99", 0.99, 100))
# std/mean above this: a spread at which a second run's mean may well differ by several percent,
# too much to compare two packages or two hosts on (a judgement, stated in docs/reports.md)
CV_WARN = 0.20


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of sorted values, interpolated linearly."""
    if not ordered:
        raise ValueError("no values")
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(times_ms: Sequence[float], wall_s: float, *, warmup: int = 0, threads: int | None = None) -> dict[str, Any]:
    """The summary of ``times_ms`` (one per call, in ms) timed over ``wall_s`` seconds of wall clock.

    Keys: n, warmup, threads (torch's intra-op thread count where the calls ran, when given:
    a CPU latency means little without it), seconds, min, max, mean, std, cv, throughput_per_s, the percentiles there
    are enough calls for, ``omitted`` (the others, each with the calls it needs) and ``unstable``.
    """
    if not times_ms:
        raise ValueError("no timed calls")
    n = len(times_ms)
    ordered = sorted(times_ms)
    mean = sum(times_ms) / n
    std = math.sqrt(sum((t - mean) ** 2 for t in times_ms) / (n - 1)) if n > 1 else 0.0
    cv = std / mean if mean > 0 else 0.0
    out: dict[str, Any] = {
        "n": n,
        "warmup": warmup,
        **({"threads": threads} if threads is not None else {}),
        "seconds": round(wall_s, 6),
        "min": round(ordered[0], 6),
        "max": round(ordered[-1], 6),
        "mean": round(mean, 6),
        "std": round(std, 6),
        "cv": round(cv, 4),
        "throughput_per_s": round(n / wall_s, 2) if wall_s > 0 else None,
    }
    omitted = []
    for name, q, needs in PERCENTILES:
        if n >= needs:
            out[name] = round(percentile(ordered, q), 6)
        else:
            omitted.append({"name": name, "needs": needs})
    out["omitted"] = omitted
    out["unstable"] = n > 1 and cv > CV_WARN
    return out


def unstable_message(summary: dict[str, Any]) -> str:
    """What an unstable summary means, for the text report."""
    return (
        f"timings vary: std is {summary['cv'] * 100:.0f}% of the mean (over {CV_WARN * 100:.0f}%); "
        "a second run may differ as much: time on an idle host, with more --iterations or a --duration"
    )
