"""Issue 40, finding 15: a stop signal ends a build as terminated, whatever its steps made of it.

The signal's ``Terminated`` unwinds through torch; a cleanup that fails on the half-done state (a
lazy import interrupted, an ``__exit__`` that raises) replaces it with an ordinary exception,
which the export step reported as ``build.export_failed``; one that lands in a ``__del__`` is
swallowed. ``signal_wins`` asks ``received()`` after every step."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from runtime_probe.reporting.recorder import StepFailed
from runtime_probe.runtime.terminate import Terminated, received, signal_wins, signals_raise


def _interrupted_then_cleanup_fails(state: Any) -> Any:
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # lands here, as in the middle of a lazy import
    finally:
        raise RuntimeError("the half-imported module is not initialised")  # replaces Terminated


def _swallowed(state: Any) -> Any:
    try:
        os.kill(os.getpid(), signal.SIGTERM)
    except BaseException:  # noqa: BLE001 - what a __del__ or a careless library does
        pass
    return [], {}


def _step_failed_after_the_signal(state: Any) -> Any:
    try:
        _interrupted_then_cleanup_fails(state)
    except RuntimeError as exc:
        raise StepFailed([], "export failed") from exc


@pytest.mark.parametrize("step", [_interrupted_then_cleanup_fails, _swallowed, _step_failed_after_the_signal])
def test_a_step_after_a_stop_signal_ends_terminated(step: Any) -> None:
    ((name, wrapped),) = signal_wins([("export", step)])
    with signals_raise(), pytest.raises(Terminated) as caught:
        wrapped(None)
    assert caught.value.signum == signal.SIGTERM
    assert name == "export"


def test_without_a_signal_a_step_keeps_its_own_outcome() -> None:
    def fails(state: Any) -> Any:
        raise StepFailed([], "export failed")

    ((_, ok),) = signal_wins([("resolve", lambda state: ([], {"x": 1}))])
    ((_, bad),) = signal_wins([("export", fails)])
    with signals_raise():
        assert received() is None
        assert ok(None) == ([], {"x": 1})
        with pytest.raises(StepFailed):
            bad(None)


def test_each_run_starts_without_the_last_ones_signal() -> None:
    ((_, step),) = signal_wins([("export", _swallowed)])
    with signals_raise(), pytest.raises(Terminated):
        step(None)
    with signals_raise():
        assert received() is None
