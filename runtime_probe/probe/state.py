"""What the probe's phases share (probe/phases.py, probe/golden_phase.py): ``Shared`` holds what all
devices share (the verified archive and manifest), ``Device`` one device's child interpreter and
what it learned; a phase returns ``Phase``. A leaf: nothing it imports imports it back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runtime_probe.child.failures import Reporter, failure_finding
from runtime_probe.child.worker import ChildCrashed, ChildFailure, ChildTimeout, Worker
from runtime_probe.ladder.steps import Replay
from runtime_probe.package.archive import Archive
from runtime_probe.package.manifest import Manifest
from runtime_probe.probe.load_log import LoadLog
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.reporting.findings import Finding
from runtime_probe.trust.signature import PublicKey

__all__ = ["Device", "Phase", "Shared", "child_finding", "replay_kind"]


@dataclass
class Shared:
    """What every device's phases share: the verified archive and its manifest."""

    path: str  # the package as given; after the archive phase, the private copy that is verified and loaded
    options: ProbeOptions
    tmp: str
    source: str = ""  # the package as given (reports, commands)
    archive: Archive | None = None
    manifest: Manifest | None = None
    golden_path: str | None = None
    public_key: PublicKey | None = None
    raw_times: dict[str, dict[str, Any]] = field(default_factory=dict)  # --latency-raw: label -> run (probe/raw_times.py)
    # why the package cannot run on any host (the archive phase's reason): only the host phase runs
    unrunnable: str | None = None


@dataclass
class Device:
    device_type: str
    device_index: int | None
    label: str = ""
    worker: Worker | None = None
    host: dict[str, Any] = field(default_factory=dict)
    golden_valid: bool = True
    replay: Replay | None = None
    # the golden runs that passed: (what a finding calls it, the child's run arguments), for memcheck
    ran: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    weights_args: dict[str, Any] | None = None  # how --weights was loaded, for the ladder's replays
    load_log: LoadLog | None = None  # the model .so's own [AOTI_LOAD] lines (probe/load_log.py)
    log: list[str] = field(default_factory=list)  # torch's warnings and log records from the child's stderr

    @property
    def device(self) -> str:
        return self.device_type + (f":{self.device_index}" if self.device_index is not None else "")


Phase = tuple[list[Finding], dict[str, Any], bool]


def child_finding(exc: ChildFailure, what: str, stage: str, shared: Shared) -> Finding:
    """A child's failure while ``what`` (loading the package, running a sample) as its finding."""
    rep = Reporter("load" if stage == "load" else "golden", shared.manifest, weights_given=bool(shared.options.weights))
    return failure_finding(exc, what, stage, rep)


def replay_kind(exc: ChildFailure) -> str:
    """How the ladder replays a failed child: after a crash, a timeout or an error."""
    return "crash" if isinstance(exc, ChildCrashed) else "timeout" if isinstance(exc, ChildTimeout) else "error"
