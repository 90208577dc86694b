"""runtime_probe.reporting.latency: percentiles only with enough calls, mean ± std, throughput, the CV warning,
and the text line the probe prints for them."""

from __future__ import annotations

import pytest

from runtime_probe.reporting.latency import CV_WARN, percentile, summarize
from runtime_probe.reporting.report import latency_lines


def test_twenty_calls_give_no_p99() -> None:
    times = [1.0 + i / 100 for i in range(20)]  # 1.00 .. 1.19 ms
    s = summarize(times, wall_s=0.5, warmup=3)
    assert s["n"] == 20 and s["warmup"] == 3
    assert "p99" not in s and s["omitted"] == [{"name": "p99", "needs": 100}]  # p99 of 20 calls would be the maximum
    assert s["p50"] == pytest.approx(1.095) and s["p90"] == pytest.approx(1.171) and s["p95"] == pytest.approx(1.1805)
    assert s["mean"] == pytest.approx(1.095) and s["std"] == pytest.approx(0.059161, abs=1e-6)
    assert s["throughput_per_s"] == 40.0 and s["unstable"] is False
    lines = latency_lines("example", s)
    assert lines[0].startswith("latency example: p50 1.095, p90 1.171, p95 1.181 ms, mean 1.095 ± 0.05916 ms")
    assert "20 runs after 3 warm-up" in lines[0] and lines[0].endswith("40.0 calls/s")
    assert lines[1] == "  p99 omitted (needs 100 runs)"


def test_few_calls_and_percentile_rule() -> None:
    s = summarize([2.0, 4.0], wall_s=0.01)
    assert s["p50"] == 3.0 and [o["name"] for o in s["omitted"]] == ["p90", "p95", "p99"]
    assert summarize([5.0], wall_s=0.01)["omitted"][0] == {"name": "p50", "needs": 2}
    assert percentile([0.0, 10.0], 0.99) == pytest.approx(9.9)
    hundred = summarize([float(i) for i in range(1, 101)], wall_s=1.0)
    assert hundred["p99"] == pytest.approx(99.01) and not hundred["omitted"]


def test_a_noisy_run_is_flagged() -> None:
    # 190 calls at 0.234 ms and 10 at 480 ms: the "p50 0.234 ms, p99 480 ms"
    s = summarize([0.234] * 190 + [480.0] * 10, wall_s=5.0)
    assert s["cv"] > CV_WARN and s["unstable"] is True
    lines = latency_lines("example", s)
    assert lines[-1].startswith("  warning: timings vary: std is") and "of the mean (over 20%)" in lines[-1]
    assert not summarize([1.0, 1.01, 0.99, 1.0], wall_s=0.01)["unstable"]


def test_the_thread_count_and_the_shapes_timed_are_in_the_line() -> None:
    """A CPU latency means little without the thread count it ran with, and a --shapes run's line
    says which sizes it timed (each of several sets has its own line)."""
    from runtime_probe.reporting.report import _latency_lines, make_phase

    s = summarize([1.0, 1.1], wall_s=0.01, threads=4)
    assert s["threads"] == 4 and "threads" not in summarize([1.0], wall_s=0.01)
    assert latency_lines("example", s)[0].endswith("calls/s, 4 threads")
    assert latency_lines("example", summarize([1.0], wall_s=0.01, threads=1))[0].endswith(", 1 thread")
    runs = [
        {"sample": "shapes1", "shapes": "x:1x16,mask:1x32", "latency_ms": s},
        {"sample": "shapes2", "shapes": "x:8x16,mask:8x32", "latency_ms": s},
    ]
    lines = [x for x in _latency_lines(make_phase("golden", 0.0, [], {"runs": runs})) if x.startswith("latency")]
    assert lines[0].startswith("latency shapes1 (x:1x16,mask:1x32): p50 ")
    assert lines[1].startswith("latency shapes2 (x:8x16,mask:8x32): p50 ")
