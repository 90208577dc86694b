"""SIGTERM and SIGHUP end a build or a probe the way Ctrl-C does: by unwinding.

The default action of both signals kills the process on the spot: no report, the children left
running (each runs in a session of its own, so a signal to the tool's process group does not reach
them), the staging folder and the extracted copies left on disk. Here the signal raises
``Terminated`` in the main thread instead, so every ``finally`` runs (each child's session is
killed, each temporary folder removed) and the command line still writes its report, with an
``env.terminated`` finding (exit 3).

A second signal while unwinding does not cut the cleanup short (each child gets at most a few
seconds before it is killed), but it bounds it: if the process has not ended ``CLEANUP_BOUND_S``
after it, a watchdog thread ends it with the terminated exit code (3), whatever the main thread
is blocked in (a FIFO's open, a stuck write, a child that will not die). A third signal ends it at
once. Without that, a cleanup that blocks would make every further SIGTERM a no-op and leave only
SIGKILL, which loses the exit code and every ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from runtime_probe.reporting.findings import EXIT_CODES, Finding, error

__all__ = [
    "CLEANUP_BOUND_S",
    "EXIT_TERMINATED",
    "STOP_SIGNALS",
    "Terminated",
    "install",
    "received",
    "signal_wins",
    "signals_raise",
    "terminated_finding",
]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# After a second stop signal the cleanup gets this long (more than the few seconds each child's
# kill may take), then the process ends anyway.
CLEANUP_BOUND_S = 15.0
EXIT_TERMINATED = EXIT_CODES["env.terminated"]


class Terminated(BaseException):
    """A stop signal arrived: unwind (a BaseException, so no ``except Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return _name(self.signum)


class _State:
    """The stop signals seen since ``install``/``signals_raise``; ``cancel`` stops an armed watchdog."""

    def __init__(self) -> None:
        self.stopping = False
        self.signum: int | None = None  # the first stop signal (``received``)
        self.again = 0
        self.cancel = threading.Event()

    def reset(self) -> None:
        self.cancel.set()  # a watchdog of an earlier run (a library caller's) must not end this one
        self.stopping, self.signum, self.again, self.cancel = False, None, 0, threading.Event()


_state = _State()


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _end_now(signum: int, why: str) -> None:
    """End the process with the terminated exit code, without unwinding (os._exit: no handler,
    no ``finally`` and no blocked call can hold it)."""
    try:
        os.write(2, f"terminated ({_name(signum)}): {why}; exiting now\n".encode())
    except OSError:
        pass
    os._exit(EXIT_TERMINATED)


def _watchdog(signum: int, bound_s: float, cancel: threading.Event) -> None:
    if not cancel.wait(bound_s):
        _end_now(signum, f"the cleanup did not finish within {bound_s:g}s of the second signal")


def _handler(signum: int, frame: Any) -> None:
    if not _state.stopping:
        _state.stopping, _state.signum = True, signum
        raise Terminated(signum)
    # already unwinding: let the cleanup finish, but within a bound
    _state.again += 1
    if _state.again == 1:
        args = (signum, CLEANUP_BOUND_S, _state.cancel)
        threading.Thread(target=_watchdog, args=args, name="terminate-watchdog", daemon=True).start()
    else:
        _end_now(signum, "a third stop signal during the cleanup")


def received() -> int | None:
    """The stop signal that arrived during this run, or None. ``Terminated`` need not survive the
    unwinding: a cleanup that fails on the way (an ``__exit__`` or ``finally`` that raises, a
    lazy import left half done) replaces it with an ordinary exception, which a step would report
    as its own failure (``build.export_failed``); a ``__del__`` swallows it. A caller asks here."""
    signum = _state.signum
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
    _state.reset()
    for s in _ours():
        signal.signal(s, _handler)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """For a library call (``probe()``, ``build()``): SIGTERM and SIGHUP raise ``Terminated`` while
    it runs in the main thread, unless the program installed its own handlers."""
    taken = _ours()
    if taken:
        _state.reset()
    for s in taken:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s in taken:
            signal.signal(s, signal.SIG_DFL)
        if taken:  # the cleanup ended within its bound: the caller's process goes on
            _state.reset()


def terminated_finding(exc: Terminated, phase: str, what: str) -> Finding:
    """``env.terminated``: the run was stopped by ``exc``'s signal during ``phase``."""
    return error(
        "env.terminated",
        phase,
        f"the {what} was terminated ({exc.name}) during the {phase} phase",
        found=exc.name,
        hint="its child processes were killed and its temporary files removed; rerun it",
    )
