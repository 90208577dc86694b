"""The one loop that runs a pipeline's steps and records each as a PhaseResult.

Both pipelines (the build, and the probe's device phases) are lists of ``(name, step)``: a step
takes the pipeline's state and returns its findings (and detail), or raises ``StepFailed`` to stop
the pipeline; the recorder times each step, reports progress, and marks the rest as skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from runtime_probe.reporting.findings import Finding
from runtime_probe.reporting.report import PhaseResult, make_phase

__all__ = ["Progress", "Recorder", "StepFailed", "StepResult", "run_steps"]

# (phase, event, seconds): event is "start", "passed"/"failed"/... on the end, or a note
Progress = Callable[[str, str, float | None], None]
StepResult = tuple[Sequence[Finding], Mapping[str, Any] | None]
State = TypeVar("State")


class StepFailed(Exception):
    """A step could not go on: its findings end the phase, and the steps after it are skipped."""

    def __init__(self, findings: Sequence[Finding], reason: str, detail: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.findings = list(findings)
        self.reason = reason
        self.detail = detail


class Recorder:
    """Collects phase results in order and reports progress (``label`` prefixes a device's phases)."""

    def __init__(self, names: Sequence[str], progress: Progress | None = None, label: str = "") -> None:
        self.names = tuple(names)
        self.results: list[PhaseResult] = []
        self._progress = progress or (lambda phase, event, seconds: None)
        self._label = label
        self._name = ""
        self._start = 0.0

    @property
    def running(self) -> str | None:
        """The phase started and not yet ended, if any."""
        return self._name if self._name and self._name not in {r.name for r in self.results} else None

    def start(self, name: str) -> None:
        self._name, self._start = name, time.monotonic()
        self._progress(self._label + name, "start", None)

    def note(self, message: str) -> None:
        self._progress(self._label + self._name, message, None)

    def end(self, findings: Sequence[Finding], detail: Mapping[str, Any] | None = None) -> PhaseResult:
        """Record the running phase. A step that had nothing to do says why in ``detail["skipped"]``
        (``--no-debug-twin``, no golden samples): the phase is then skipped, with that reason."""
        seconds = time.monotonic() - self._start
        skipped = detail.get("skipped") if detail else None
        if isinstance(skipped, str) and detail is not None:
            rest = {k: v for k, v in detail.items() if k != "skipped"}
            result = make_phase(self._name, seconds, findings, rest, skipped_reason=skipped)
        else:
            result = make_phase(self._name, seconds, findings, detail)
        self.results.append(result)
        self._progress(self._label + self._name, result.status, seconds)
        return result

    def skip(self, name: str, reason: str) -> None:
        self.results.append(make_phase(name, 0.0, [], skipped_reason=reason))
        self._progress(self._label + name, f"skipped: {reason}", None)

    def abort(self, findings: Sequence[Finding], reason: str) -> None:
        """The run stops from outside (a signal): the running phase ends with ``findings`` (with
        none running, they go in a phase named "cli"), and the phases not yet run are skipped."""
        if self.running:
            self.end(findings)
        else:
            self.results.append(make_phase("cli", 0.0, findings))
        self.skip_rest(reason)

    def skip_rest(self, reason: str) -> None:
        """Mark every named phase not yet recorded as skipped."""
        done = {r.name for r in self.results}
        for name in self.names:
            if name not in done:
                self.results.append(make_phase(name, 0.0, [], skipped_reason=reason))


def run_steps(recorder: Recorder, steps: Sequence[tuple[str, Callable[[State], StepResult]]], state: State) -> bool:
    """Run ``steps`` in order on ``state``; False when one raised ``StepFailed`` (the rest are skipped)."""
    for name, step in steps:
        recorder.start(name)
        try:
            findings, detail = step(state)
        except StepFailed as stop:
            recorder.end(stop.findings, stop.detail)
            recorder.skip_rest(stop.reason)
            return False
        recorder.end(findings, detail)
    return True
