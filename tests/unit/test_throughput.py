"""``probe --threads``: the caller counts' syntax, the concurrent-caller loop on a fake runner that
serialises (a lock, as one AOTI runner does) and one that does not, and the verdict read off
measured numbers (the 2-core test host cannot show real scaling)."""

from __future__ import annotations

import threading
import time

import pytest

from runtime_probe.child.concurrency import measure
from runtime_probe.probe.throughput import SCALING_MIN, Facts, parse_threads, scaling, verdict
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import Severity


def test_counts_are_sorted_with_the_baseline() -> None:
    assert parse_threads("4,2") == (1, 2, 4)
    assert parse_threads(" 1, 8 ,8") == (1, 8)


@pytest.mark.parametrize(
    ("text", "words"), [("2,x", "'x' is not a whole number"), ("0,2", "0 callers is outside"), ("1", "compares nothing")]
)
def test_bad_counts_are_refused_with_the_flag_named(text: str, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_threads(text)
    assert words in str(caught.value) and "--threads 1,2,4" in (caught.value.hint or "")


def _sleeper(lock: threading.Lock | None) -> object:
    """A call that waits 10 ms without the GIL, inside ``lock`` when given (one runner)."""

    def call() -> None:
        if lock is None:
            time.sleep(0.01)
            return
        with lock:
            time.sleep(0.01)

    return call


def test_one_runner_serialises_and_more_callers_overlap_without_it() -> None:
    one_runner = _sleeper(threading.Lock())
    alone = measure(one_runner, 1, 0.3, lambda: 1)  # type: ignore[arg-type]
    four = measure(one_runner, 4, 0.3, lambda: 1)  # type: ignore[arg-type]
    free = measure(_sleeper(None), 4, 0.3, lambda: 3)  # type: ignore[arg-type]
    assert four["calls_per_s"] < 1.3 * alone["calls_per_s"]  # the lock holds the callers to one at a time
    assert free["calls_per_s"] > 2.5 * alone["calls_per_s"]
    assert len(four["per_caller"]) == 4 and sum(four["per_caller"]) == four["calls"] and four["seconds"] >= 0.3
    assert free["intra_op_threads"] == 3 and free["callers"] == 4


def test_a_callers_error_reaches_the_requester() -> None:
    def broken() -> None:
        raise RuntimeError("the runner refused")

    with pytest.raises(RuntimeError, match="the runner refused"):
        measure(broken, 2, 0.2, lambda: 1)


def test_scaling_counts_give_no_finding() -> None:
    assert verdict(Facts("cpu", {1: 100.0, 2: 190.0, 4: 330.0})) is None
    assert scaling(Facts("cpu", {1: 100.0, 4: 330.0})) == {1: 1.0, 4: 3.3}


def test_serialised_and_the_remedy_verified() -> None:
    found = verdict(Facts("cpu", {1: 100.0, 4: 104.0}, remedy_rate=310.0, cores=16, intra_op=1))
    assert found is not None and found.code == "golden.throughput_serialised" and found.severity is Severity.WARNING
    assert "loaded with one runner" in found.message and "3.10x, verified here" in found.message
    assert "num_runners=4" in (found.hint or "") and found.evidence["remedy_scaling"] == 3.1
    assert found.expected == f"more than {SCALING_MIN:g}x with 4 callers" and "1.04x" in (found.found or "")


def test_serialised_unverified_says_why() -> None:
    found = verdict(Facts("cuda", {1: 100.0, 2: 100.0}, unverified="loading it with 2 runners failed: out of memory"))
    assert found is not None and found.code == "golden.throughput_serialised"
    assert "could not be tried here: loading it with 2 runners failed: out of memory" in found.message


def test_runners_that_do_not_help_clear_the_runner() -> None:
    over = verdict(Facts("cpu", {1: 100.0, 4: 95.0}, remedy_rate=98.0, cores=2, intra_op=2))
    assert over is not None and over.code == "golden.throughput_saturated" and over.severity is Severity.INFO
    assert "4 callers x 2 intra-op threads per call is more than the 2 core(s)" in over.message
    busy = verdict(Facts("cpu", {1: 100.0, 2: 95.0}, remedy_rate=98.0, cores=8, intra_op=1, load_average=11.5))
    assert busy is not None and "other processes were using them (load average 11.5 on 8 core(s))" in busy.message
    gpu = verdict(Facts("cuda", {1: 100.0, 2: 101.0}, remedy_rate=99.0))
    assert gpu is not None and "keep the device busy" in gpu.message


def test_a_busy_window_under_the_baseline_does_not_read_as_scaling() -> None:
    """The flake this guards (CI's 2.13 lane, 2026-11-27): a one-runner package timed while another
    worker compiled gave one caller 40 calls/s and, a second later, two callers 52: "scaling" 1.3x.
    Timed in interleaved rounds, each count keeps its best window, so the slowed baseline window
    is outvoted and the package is seen serialising."""
    from runtime_probe.child.ops import THROUGHPUT_ROUNDS, _best_of_rounds

    windows = iter([40.0, 52.0, 55.0, 53.0])  # round 1: 1 caller (busy host), 2 callers; round 2: both quiet
    seen_windows: list[float] = []

    def timed(callers: int, seconds: float) -> dict[str, object]:
        seen_windows.append(seconds)
        return {"callers": callers, "calls_per_s": next(windows)}

    counts = _best_of_rounds(timed, [1, 2], 1.0)
    rates = {int(c["callers"]): float(c["calls_per_s"]) for c in counts}  # type: ignore[arg-type]
    assert rates == {1: 55.0, 2: 53.0}
    assert seen_windows == [1.0 / THROUGHPUT_ROUNDS] * 4  # the probe's time is unchanged
    found = verdict(Facts("cpu", rates))
    assert found is not None and found.code == "golden.throughput_serialised"
