"""torch's noise during a build: its Python warnings and log records go to the report and --log-file.

A build imports torch, Dynamo and Inductor, which warn (FutureWarning LeafSpec, the TF32 hint) and
log to the terminal through handlers of their own; the user's terminal shows the build's progress
instead, and every such line is kept in the report's ``log`` (``with_log``) and the --log-file.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from runtime_probe.reporting.progress import Progress
from runtime_probe.reporting.report import Report

__all__ = ["torch_noise_to_log", "with_log"]


def _writes_to_the_terminal(handler: Any) -> bool:
    """A log handler that writes to stderr or stdout: a ``logging.StreamHandler`` (torch up to
    2.14), or torch 2.15's ``_StderrHandler``, a plain ``logging.Handler`` whose ``stream`` is
    whatever ``sys.stderr`` is when it writes."""
    import logging

    if isinstance(handler, logging.FileHandler):
        return False
    return isinstance(handler, logging.StreamHandler) or getattr(handler, "stream", None) in (sys.stderr, sys.stdout)


@contextmanager
def torch_noise_to_log(progress: Progress, sink: list[str]) -> Iterator[None]:
    """torch's Python warnings (FutureWarning LeafSpec, the TF32 hint) and its log records go to the
    report (``sink``) and --log-file, not to the user's terminal."""
    import logging

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            line = f"{record.levelname} {record.name}: {record.getMessage()}"
            sink.append(line)
            progress.log_line(line)

    handler = _Keep(level=logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        # torch's import installs its stderr handlers (torch._logging._init_logs): imported after
        # the swap below, it put them back, and every torch log line of the build reached the
        # terminal (a CUDA wheel's "No CUDA runtime is found" on a CPU build, issue 44). The build
        # imports torch anyway; one that cannot is reported by the build itself.
        try:
            import torch  # noqa: F401
        except Exception:  # noqa: BLE001 - any failure of torch's import is the build's to report
            pass
        # torch._logging gives "torch" and its components (torch._dynamo, torch._inductor, ...)
        # their own stderr handlers with propagate=False: each such logger gets ours instead
        swapped: list[tuple[logging.Logger, list[logging.Handler], list[logging.Handler]]] = []
        for name in ["torch", *sorted(n for n in logging.Logger.manager.loggerDict if n.startswith("torch."))]:
            logger = logging.getLogger(name)
            streams: list[logging.Handler] = [h for h in logger.handlers if _writes_to_the_terminal(h)]
            if name == "torch" or streams or not logger.propagate:
                swapped.append((logger, streams, list(logger.handlers)))
        for logger, streams, _ in swapped:
            if logger.name == "torch" or not logger.propagate:  # a propagating one reaches an ancestor's: once
                logger.addHandler(handler)
            for h in streams:
                logger.removeHandler(h)
        try:
            yield
        finally:
            for logger, streams, before in swapped:
                logger.removeHandler(handler)  # a no-op where it was not added
                # the caller's handlers back in their order (a library caller may rely on it), then
                # any a component added during the build
                now = logger.handlers
                logger.handlers = [h for h in before if h in streams or h in now] + [h for h in now if h not in before]
    for w in caught:
        line = f"{w.category.__name__} {os.path.basename(str(w.filename))}:{w.lineno}: {w.message}"
        sink.append(line)
        progress.log_line(line)


def with_log(report: Report, lines: Sequence[str]) -> Report:
    if not lines:
        return report
    unique = list(dict.fromkeys(lines))[:200]  # the same warning raised per call is kept once
    return dataclasses.replace(report, extra={**report.extra, "log": unique})
