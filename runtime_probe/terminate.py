"""SIGTERM and SIGHUP end a build or a probe the way Ctrl-C does: by unwinding.

The default action of both signals kills the process on the spot: no report, the children left
running (each runs in a session of its own, so a signal to the tool's process group does not reach
them), the staging folder and the extracted copies left on disk. Here the signal raises
``Terminated`` in the main thread instead, so every ``finally`` runs (each child's session is
killed, each temporary folder removed) and the command line still writes its report, with an
``env.terminated`` finding (exit 3).

A second signal while unwinding is ignored: it must not cut the cleanup short (the cleanup is
bounded: each child gets at most a few seconds before it is killed).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from runtime_probe.findings import Finding, error

__all__ = ["STOP_SIGNALS", "Terminated", "install", "received", "signal_wins", "signals_raise", "terminated_finding"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(BaseException):
    """A stop signal arrived: unwind (a BaseException, so no ``except Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"


_state: dict[str, Any] = {"stopping": False, "signum": None}


def _handler(signum: int, frame: Any) -> None:
    if _state["stopping"]:
        return  # already unwinding: let the cleanup finish
    _state["stopping"], _state["signum"] = True, signum
    raise Terminated(signum)


def received() -> int | None:
    """The stop signal that arrived during this run, or None. ``Terminated`` need not survive the
    unwinding: a cleanup that fails on the way (an ``__exit__`` or ``finally`` that raises, a
    lazy import left half done) replaces it with an ordinary exception, which a step would report
    as its own failure (``build.export_failed``); a ``__del__`` swallows it. A caller asks here."""
    signum = _state["signum"]
    return int(signum) if signum is not None else None


_S = TypeVar("_S")
_R = TypeVar("_R")


def signal_wins(steps: Sequence[tuple[str, Callable[[_S], _R]]]) -> tuple[tuple[str, Callable[[_S], _R]], ...]:
    """A pipeline's ``steps``, each ending in ``Terminated`` once a stop signal has arrived,
    whatever it raised or returned (``received`` says why the signal's own ``Terminated`` may not
    get there): a SIGTERM during a lazy import inside torch.export was a ``build.export_failed``."""

    def wrap(step: Callable[[_S], _R]) -> Callable[[_S], _R]:
        def run(state: _S) -> _R:
            try:
                result = step(state)
            except Exception as exc:  # a step's own failure (StepFailed) included: the signal caused it
                signum = received()
                if signum is None:
                    raise
                raise Terminated(signum) from exc
            signum = received()
            if signum is not None:  # swallowed on the way (a __del__): the run stops all the same
                raise Terminated(signum)
            return result

        return run

    return tuple((name, wrap(step)) for name, step in steps)


def _ours() -> list[signal.Signals]:
    """The stop signals whose handler is still the default (one set to SIG_IGN, as under nohup, stays ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    return [s for s in STOP_SIGNALS if signal.getsignal(s) is signal.SIG_DFL]


def install() -> None:
    """For a command line: from now on, SIGTERM and SIGHUP raise ``Terminated`` in the main thread."""
    _state["stopping"], _state["signum"] = False, None
    for s in _ours():
        signal.signal(s, _handler)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """For a library call (``probe()``, ``build()``): SIGTERM and SIGHUP raise ``Terminated`` while
    it runs in the main thread, unless the program installed its own handlers."""
    taken = _ours()
    if taken:
        _state["stopping"], _state["signum"] = False, None
    for s in taken:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s in taken:
            signal.signal(s, signal.SIG_DFL)


def terminated_finding(exc: Terminated, phase: str, what: str) -> Finding:
    """``env.terminated``: the run was stopped by ``exc``'s signal during ``phase``."""
    return error(
        "env.terminated",
        phase,
        f"the {what} was terminated ({exc.name}) during the {phase} phase",
        found=exc.name,
        hint="its child processes were killed and its temporary files removed; rerun it",
    )
