"""``probe --latency-raw FILE``: every timed call's seconds, for the user's own statistics or plots.

The report keeps the statistics alone (runtime_probe/reporting/latency.py); a timed run's per-call times
can be millions of numbers, so they go to their own file, on request. The child returns them
beside the summary (child/ops.py ``raw_times``); the golden phase keeps them here, on ``Shared``,
under the run's name as its latency line shows it (``example``, ``shapes2``; with --all-devices
the device first: ``cuda:1/example``); the probe writes them once at its end, through the path
rule and reporting/output.py's writer like every other output. The file::

    {"unit": "s", "runs": {"example": {"device": "cpu", "threads": 8, "warmup": 10,
                                       "times_s": [0.00021, ...]},
                           "shapes2": {..., "shapes": "x:8x16,mask:8x32", "times_s": [...]}}}
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from runtime_probe.probe.state import Device, Shared
from runtime_probe.reporting.output import write_output
from runtime_probe.reporting.paths import probe_paths

__all__ = ["keep_raw", "write_raw"]

_LOCK = threading.Lock()  # --all-devices: one golden phase per device, in threads


def keep_raw(shared: Shared, dev: Device, run: Mapping[str, Any], times_s: Sequence[float]) -> None:
    """Keep one run's per-call seconds (``run``: its entry in the golden phase's detail)."""
    label = str(run["sample"]) if not shared.options.all_devices else f"{dev.device}/{run['sample']}"
    lat = run.get("latency_ms") or {}
    entry: dict[str, Any] = {"device": dev.device, "threads": lat.get("threads"), "warmup": lat.get("warmup")}
    if run.get("shapes"):
        entry["shapes"] = run["shapes"]
    entry["times_s"] = [float(t) for t in times_s]
    with _LOCK:
        shared.raw_times[label] = entry


def write_raw(path: str, package: str, shared: Shared) -> None:
    """Write the kept times to ``path`` (a file or a FIFO), once the path rule allows it (asked again:
    the run's outputs were checked before any work, the file is written after all of it). A run
    that timed nothing (the model never loaded) writes ``"runs": {}``: a reader finds the file."""
    probe_paths(package, vars(shared.options), reports=False).check_file("--latency-raw", path)
    body = {"unit": "s", "runs": dict(sorted(shared.raw_times.items()))}
    write_output(path, (json.dumps(body, indent=1) + "\n").encode())
