"""Progress lines, ONE format for ``aoti-guard`` and ``python -m runtime_probe`` (standard library only).

Events come as ``(phase, event[, seconds])``: ``start``; an end status (``passed``, ``failed``,
``skipped: why``); or a note (an escalation step, a build step's detail). In a pipe, under ``CI``
or with ``TERM=dumb`` every event is one plain line::

    [archive] start
    [archive] passed in 0.12s

On a terminal the running phase (or escalation step) is one live line that is redrawn with its
elapsed time, then left in place as ``[archive] passed in 0.12s``; it is coloured unless
``NO_COLOR`` is set (https://no-color.org). ``transient``: the ended phase's line is erased
instead, when the report's table that follows on the same terminal lists every phase again.

In a pipe a phase that runs longer than ``HEARTBEAT_S`` gets a heartbeat line every
``HEARTBEAT_S`` (what it is doing, elapsed), so a CI log shows the run is alive::

    [compile] still running (20s)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

from runtime_probe.reporting.errors import ToolError
from runtime_probe.reporting.escaping import for_terminal
from runtime_probe.reporting.output import open_nonblocking, write_all

__all__ = ["HEARTBEAT_S", "Progress", "is_live_terminal"]

_COLOURS = {"passed": "32", "failed": "31", "skipped": "33", "start": "36"}
_ENDS = ("passed", "failed", "skipped")
_TICK_S = 0.25
HEARTBEAT_S = 10.0


def is_live_terminal(stream: TextIO) -> bool:
    """A live line only on a real terminal, and not under CI (its log viewers show every redraw)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


class Progress:
    """A progress callback: ``progress(phase, event, seconds=None)``. ``close()`` ends a live line."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        quiet: bool = False,
        colour: bool | None = None,
        log: str | None = None,
        transient: bool = False,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        # --log-file: every event as a plain, timestamped line, whatever the terminal shows. Opened
        # and written without blocking (runtime_probe/reporting/output.py): a FIFO without a reader, or one
        # that stops reading, costs the log (said once on stderr), never the run.
        self._log: int | None = None
        self._log_name = f"the --log-file {log}"
        if log:
            try:
                self._log = open_nonblocking(log, self._log_name, append=True)
            except ToolError as exc:
                self._write(f"warning: {exc.message}; going on without the log\n")
        self.quiet = quiet
        self.live = is_live_terminal(self.stream)  # a live line only where a person watches a terminal
        self.colour = (self.live and "NO_COLOR" not in os.environ) if colour is None else colour
        self._lock = threading.Lock()
        self._current: tuple[str, str, float] | None = None  # (phase, text, started)
        self._started: dict[str, float] = {}
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self.transient = transient and self.live
        self._heartbeat_s = heartbeat_s
        # phase -> (started, what it is doing, when a line about it was last written), every mode
        self._running: dict[str, tuple[float, str, float]] = {}
        self._beater: threading.Thread | None = None

    @property
    def running(self) -> str | None:
        """The phase started last and not ended yet (an interrupted run names it)."""
        with self._lock:
            return next(reversed(self._running), None)

    def __call__(self, phase: str, event: str, seconds: float | None = None) -> None:
        now = time.monotonic()
        if self._log is not None:
            took = f" in {seconds:.2f}s" if seconds is not None else ""
            self.log_line(f"[{phase}] {event}{took}")
        with self._lock:
            if event == "start":
                self._running[phase] = (now, "", now)
            elif event.startswith(_ENDS):
                self._running.pop(phase, None)
            elif phase in self._running:
                self._running[phase] = (self._running[phase][0], event, now)
        if self.quiet:
            return
        with self._lock:
            if event == "start":
                self._started[phase] = now
                self._begin(phase, "...", now)
            elif event.startswith(_ENDS):
                elapsed = seconds if seconds is not None else (now - self._started.pop(phase, now))
                self._finish(phase, event, None if event.startswith("skipped") else elapsed)
            else:
                self._note(phase, event, now)

    def log_line(self, text: str) -> None:
        """One line for the --log-file only (torch's warnings, library logs): never the terminal."""
        if self._log is None:
            return
        now = time.time()
        # milliseconds: the file is also a timeline of the run (the zoo reads where a build's time goes)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"
        # one line each, escaped: a name in torch's message can neither forge a line nor drive a terminal
        data = "".join(f"{stamp} {for_terminal(line)}\n" for line in text.splitlines() or [""]).encode()
        with self._lock:
            if self._log is None:
                return
            try:
                write_all(self._log, data, self._log_name)
            except ToolError as exc:
                self._write(f"warning: {exc.message}; the rest of the run is not logged\n")
                self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            fd, self._log = self._log, None
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        """Stop redrawing; a line still live is left as it stands."""
        self._stop.set()
        with self._lock:
            if self._current is not None and self.live:
                self._write("\n")
            self._current = None
            self._close_log()

    # --- rendering -------------------------------------------------------------------------

    def _paint(self, text: str, status: str) -> str:
        code = next((c for k, c in _COLOURS.items() if status.startswith(k)), None)
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour and code else text

    def _line(self, phase: str, event: str, seconds: float | None) -> str:
        took = f" in {seconds:.2f}s" if seconds is not None else ""
        return f"[{phase}] {self._paint(event, event)}{took}"

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stderr must not fail the run

    def _begin(self, phase: str, text: str, now: float) -> None:
        if not self.live:
            self._write(self._line(phase, "start", None) + "\n")
            self._ensure_heartbeat()
            return
        if self._current is not None:
            self._write("\n")  # a parallel phase (--all-devices) keeps the line it had
        self._current = (phase, text, now)
        self._redraw()
        self._ensure_ticker()

    def _note(self, phase: str, text: str, now: float) -> None:
        if not self.live:
            self._write(f"[{phase}] {text}\n")
            return
        if self._current is not None and self._current[0] == phase:
            self._redraw(final=True)  # the previous step stays on screen with its time
            self._write("\n")
        self._current = (phase, text, now)
        self._redraw()
        self._ensure_ticker()

    def _finish(self, phase: str, event: str, seconds: float | None) -> None:
        line = self._line(phase, event, seconds)
        if self.live and self.transient and self._current is not None and self._current[0] == phase:
            self._write("\r\x1b[2K")  # the report's table that follows shows the phase: not twice
            self._current = None
        elif self.live and self._current is not None:
            self._write("\r\x1b[2K" + line + "\n")
            self._current = None
        else:
            self._write(line + "\n")

    def _redraw(self, *, final: bool = False) -> None:
        if self._current is None:
            return
        phase, text, since = self._current
        elapsed = time.monotonic() - since
        self._write(f"\r\x1b[2K[{phase}] {self._paint(text, 'start') if not final else text} {elapsed:5.1f}s")

    def _ensure_heartbeat(self) -> None:
        if self._beater is not None and self._beater.is_alive():
            return
        self._beater = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
        self._beater.start()

    def _beat(self) -> None:
        """In a pipe: a line for each phase that has printed nothing for ``heartbeat_s``."""
        step = min(1.0, self._heartbeat_s / 4)
        while not self._stop.wait(step):
            with self._lock:
                now = time.monotonic()
                for phase, (started, doing, last) in list(self._running.items()):
                    if now - last >= self._heartbeat_s:
                        what = f"still running: {doing}" if doing else "still running"
                        self._write(f"[{phase}] {what} ({now - started:.0f}s)\n")
                        self._running[phase] = (started, doing, now)

    def _ensure_ticker(self) -> None:
        if self._ticker is not None and self._ticker.is_alive():
            return
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(_TICK_S):
            with self._lock:
                if self._current is None:
                    return
                self._redraw()
