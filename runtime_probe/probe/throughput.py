"""``probe --threads 1,2,4``: throughput with several concurrent callers, and the package that
serialises them.

A serving process calls one loaded model from several request threads. AOTInductor's loader keeps
``num_runners`` model containers (``AOTIModelPackageLoader(path, model_name, run_single_threaded,
num_runners, device_index)``, 2.11-2.15; ``torch._inductor.package.load_package(...,
num_runners=N)``; ``torch._inductor.aoti_load_package`` does not take it and keeps 1): with one,
each call waits for the one before it, so N callers get the calls/s of one (pytorch #134946,
#148937, #144459). Each count runs in the probe's child on the first golden sample that ran
(child/concurrency.py); when N callers give no more than ``SCALING_MIN`` times one caller, a second
model is loaded with N runners and timed again with N callers: that names the cause (the runner:
the remedy helped) or clears it (the cores or the device were already busy). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime_probe.child.worker import ChildFailure
from runtime_probe.probe.state import Device, Shared
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import Finding, info, warning

__all__ = ["DEFAULT_SECONDS", "MAX_CALLERS", "SCALING_MIN", "Facts", "parse_threads", "run_throughput", "verdict"]

# N callers must give more than this many times one caller's calls/s to count as scaling: below
# it, the gain is within what a busy host's noise gives (a judgement, stated in docs/reports.md)
SCALING_MIN = 1.2
DEFAULT_SECONDS = 1.0  # each count's timed time (its interleaved windows together: child/ops.py), unless --duration gives one
MAX_CALLERS = 256
_HINT = "give caller counts separated by commas, e.g. --threads 1,2,4 (1, the baseline, is added when left out)"
_RUNNERS_KEY = "throughput-runners"


def parse_threads(text: str) -> tuple[int, ...]:
    """``"2,4"`` -> (1, 2, 4): the counts, sorted, each once, with the one-caller baseline. Raises UsageError."""
    counts: set[int] = {1}
    for item in (part.strip() for part in text.split(",")):
        try:
            n = int(item)
        except ValueError:
            raise UsageError(f"--threads: {item!r} is not a whole number of callers", hint=_HINT) from None
        if not 1 <= n <= MAX_CALLERS:
            raise UsageError(f"--threads: {n} callers is outside 1..{MAX_CALLERS}", hint=_HINT)
        counts.add(n)
    if len(counts) == 1:
        raise UsageError("--threads 1 compares nothing: one caller is the baseline every count is measured against", hint=_HINT)
    return tuple(sorted(counts))


@dataclass(frozen=True)
class Facts:
    """What a verdict reads: the device type, the calls/s per caller count (1 included), the
    calls/s of the top count with that many runners (None: not measured, ``unverified`` says why),
    the CPUs the child may use and the intra-op threads a caller thread runs the package with."""

    device_type: str
    rates: Mapping[int, float]
    remedy_rate: float | None = None
    unverified: str | None = None
    cores: int | None = None
    intra_op: int | None = None
    load_average: float | None = None  # the host's 1-minute load average while the counts ran


def scaling(facts: Facts) -> dict[int, float]:
    """Each count's calls/s over one caller's (1.0 for the baseline)."""
    base = facts.rates.get(1) or 0.0
    return {n: round(rate / base, 2) if base > 0 else 0.0 for n, rate in sorted(facts.rates.items())}


def verdict(facts: Facts) -> Finding | None:
    """None when the top count scales (above ``SCALING_MIN``); else ``golden.throughput_serialised``
    (a warning: more runners helped, or could not be tried) or ``golden.throughput_saturated`` (info:
    N runners did not help either, so the one runner is not what holds the calls back)."""
    top = max(facts.rates)
    gain = scaling(facts).get(top, 0.0)
    if top == 1 or gain > SCALING_MIN:
        return None
    base = facts.rates[1]
    found = f"{top} callers: {facts.rates[top]:.1f} calls/s = {gain:.2f}x of one caller's {base:.1f}"
    expected = f"more than {SCALING_MIN:g}x with {top} callers"
    evidence: dict[str, Any] = {
        "scaling": {str(n): s for n, s in scaling(facts).items()},
        "runners_tried": top if facts.remedy_rate else None,
    }
    remedy = f"runtime_probe.load(pkg, num_runners={top}) or torch._inductor.package.load_package(pkg, num_runners={top})"
    if facts.remedy_rate is None:
        return warning(
            "golden.throughput_serialised",
            "golden",
            f"{top} concurrent callers get no more calls/s than one ({gain:.2f}x): the package was loaded with one runner "
            f"(AOTInductor's default), so each call waits for the one before it; {top} runners could not be tried here: "
            f"{facts.unverified or 'not measured'}",
            expected=expected,
            found=found,
            hint=f"load it with {remedy} in a server that calls it from {top} threads",
            evidence=evidence,
        )
    fixed = round(facts.remedy_rate / base, 2) if base > 0 else 0.0
    evidence["remedy_scaling"] = fixed
    if fixed > SCALING_MIN:
        return warning(
            "golden.throughput_serialised",
            "golden",
            f"{top} concurrent callers get no more calls/s than one ({gain:.2f}x): the package was loaded with one runner "
            f"(AOTInductor's default), so each call waits for the one before it; loaded with {top} runners, the same "
            f"{top} callers gave {facts.remedy_rate:.1f} calls/s ({fixed:.2f}x, verified here)",
            expected=expected,
            found=found,
            hint=f"load it with {remedy} in a server that calls it from {top} threads (each runner holds its own activations)",
            evidence=evidence,
        )
    return info(
        "golden.throughput_saturated",
        "golden",
        _saturated_message(facts, top, gain, fixed),
        expected=expected,
        found=found,
        evidence=evidence,
    )


def _saturated_message(facts: Facts, top: int, gain: float, fixed: float) -> str:
    """Why N callers do not scale when N runners do not help either."""
    if facts.device_type == "cpu" and facts.intra_op and facts.cores and top * facts.intra_op > facts.cores:
        busy = (
            f"{top} callers x {facts.intra_op} intra-op threads per call is more than the {facts.cores} core(s) this host "
            "gives the probe, so the callers share the same cores"
        )
        where = "; to serve callers side by side, give each fewer intra-op threads (OMP_NUM_THREADS) and load it with more runners"
    elif facts.device_type == "cpu":
        load = f" (load average {facts.load_average:.1f} on {facts.cores} core(s))" if facts.load_average is not None else ""
        busy = f"the callers had cores enough on paper, so other processes were using them{load} or the calls are bound by memory bandwidth"
        where = "; measure again on an idle host"
    else:
        busy = "one caller's kernels already keep the device busy"
        where = ""
    return (
        f"{top} concurrent callers get {gain:.2f}x of one caller's calls/s, and {fixed:.2f}x with {top} runners: "
        f"the one runner is not what holds them back: {busy}{where}"
    )


def run_throughput(shared: Shared, dev: Device, sample: str, args: Mapping[str, Any]) -> tuple[list[Finding], dict[str, Any]]:
    """The --threads measurement on one sample (``sample`` names it; ``args``: its run arguments
    as the golden phase sends them to the child), then the remedy's when the counts do not scale:
    the findings and the detail the golden phase reports under ``throughput``. Raises ChildFailure
    when the child fails."""
    assert dev.worker is not None
    counts = parse_threads(shared.options.threads or "")
    seconds = facts_seconds(shared)
    budget = shared.options.timeout_s + seconds * len(counts)
    reply = dev.worker.request("throughput", budget, key="release", callers=list(counts), seconds=seconds, **args)
    if "counts" not in reply:  # the sample was refused: the golden phase reported it already
        return [], {"skipped": "the sample could not run"}
    facts = Facts(
        dev.device_type,
        {int(c["callers"]): float(c["calls_per_s"] or 0.0) for c in reply["counts"]},
        cores=reply.get("cores"),
        intra_op=max(int(c.get("intra_op_threads") or 0) for c in reply["counts"]) or None,
        load_average=reply.get("load_average"),
    )
    detail: dict[str, Any] = {
        "sample": sample,
        "seconds_each": seconds,
        "counts": reply["counts"],
        "scaling": {str(n): s for n, s in scaling(facts).items()},
        "runners": 1,
        "cores": facts.cores,
        "intra_op_threads": facts.intra_op,
        "main_intra_op_threads": reply.get("main_intra_op_threads"),
        "load_average": facts.load_average,
    }
    top = max(counts)
    if scaling(facts)[top] <= SCALING_MIN:
        facts = _with_remedy(shared, dev, args, facts, budget)
        detail["remedy"] = {"runners": top, "calls_per_s": facts.remedy_rate, "unverified": facts.unverified}
    found = verdict(facts)
    return ([found] if found is not None else []), detail


def _with_remedy(shared: Shared, dev: Device, args: Mapping[str, Any], facts: Facts, budget: float) -> Facts:
    """``facts`` with the top count's calls/s from a second model loaded with that many runners."""
    assert dev.worker is not None
    top = max(facts.rates)
    model_name = shared.manifest.model_name if shared.manifest is not None else "model"
    try:
        dev.worker.request(
            "load", shared.options.timeout_s, key=_RUNNERS_KEY, path=shared.path, model_name=model_name,
            device_index=dev.device_index, num_runners=top,
        )  # fmt: skip
        if dev.weights_args is not None:  # the same --weights as the model it stands in for
            dev.worker.request("load_weights", shared.options.timeout_s, key=_RUNNERS_KEY, **dev.weights_args)
        reply = dev.worker.request("throughput", budget, key=_RUNNERS_KEY, callers=[top], seconds=facts_seconds(shared), **args)
    except ChildFailure as exc:
        return Facts(**{**vars(facts), "unverified": f"loading it with {top} runners failed: {str(exc)[:300]}"})
    rate = float(reply["counts"][0]["calls_per_s"] or 0.0) if reply.get("counts") else None
    return Facts(**{**vars(facts), "remedy_rate": rate, "unverified": None if rate else "the sample could not run"})


def facts_seconds(shared: Shared) -> float:
    """Each count's timed time, its windows together: --duration, else ``DEFAULT_SECONDS``."""
    return shared.options.duration_s or DEFAULT_SECONDS
