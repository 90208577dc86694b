"""The probe: archive -> host -> load -> constants -> golden -> escalate.

Nothing native is opened before the archive phase passed (safe zip, manifest, hashes). Loading and
running happen in one child interpreter (child.Worker) that the host phase also asks for its
facts, so torch is imported once. A failing phase skips the ones that depend on it; a failed load
or run climbs the escalation ladder (escalate.py). With ``all_devices``, every visible GPU is
probed in parallel, one child per device, each in its own report section.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import __version__
from .archive import sha256_file
from .child import ChildFailure, Worker
from .errors import UsageError
from .escalate import LadderContext, run_ladder
from .host import parse_device
from .phases import Device, Shared, archive_phase, constants_phase, golden_phase, host_phase, load_phase, package_device
from .report import PhaseResult, Report, make_phase
from .signature import load_public_key

__all__ = ["PHASES", "ProbeOptions", "probe"]

PHASES = ("archive", "host", "load", "constants", "golden", "escalate")


@dataclass(frozen=True)
class ProbeOptions:
    """How to probe.

    Attributes:
        device: "cpu", "cuda" or "cuda:N"; None = the device the package was built for.
        weights: a safetensors file to validate and load in place of the package's constants.
        inputs: a safetensors file of inputs (keys = input names) to run after the golden samples,
            e.g. inputs captured from a failing request.
        inputs_device: where to place ``inputs`` (default: the model's device); "cpu" replays a
            caller that forgot to move them.
        fast: the container pre-flight: archive, host, load and one golden sample.
        timeout_s: limit for each child request (load, one golden run).
        escalate: climb the escalation ladder when loading or running fails.
        escalate_timeout_s: bound on the whole ladder.
        all_devices: probe every visible GPU, in parallel.
        python: the interpreter the child runs (the probe's own by default).
        env: extra environment for the child.
        public_key: an Ed25519 public key file (PEM): the package must carry a valid signature by
            it, checked before the manifest is believed and before anything native is opened.
    """

    device: str | None = None
    weights: str | None = None
    inputs: str | None = None
    inputs_device: str | None = None
    fast: bool = False
    timeout_s: float = 300.0
    escalate: bool = True
    escalate_timeout_s: float = 600.0
    all_devices: bool = False
    python: str | None = None
    env: Mapping[str, str | None] = field(default_factory=dict)
    public_key: str | None = None


ProgressFn = Callable[[str, str], None]


def _check_options(options: ProbeOptions) -> None:
    for flag, value in (("--device", options.device), ("--inputs-device", options.inputs_device)):
        if value is not None:
            try:
                parse_device(value)
            except ValueError:
                raise UsageError(f"{flag}: unknown device {value!r}", hint="use cpu, cuda or cuda:N") from None
    for flag, value in (("--weights", options.weights), ("--inputs", options.inputs)):
        if value is not None and not os.path.isfile(value):
            raise UsageError(f"{flag}: no such file {value}", hint=f"{flag} takes a .safetensors file")
    if options.all_devices and options.device not in (None, "cuda"):
        raise UsageError(
            "--all-devices probes every visible GPU; it cannot be combined with a device index", hint="drop --device, or drop --all-devices"
        )


def probe(path: str | os.PathLike[str], options: ProbeOptions = ProbeOptions(), progress: ProgressFn | None = None) -> Report:
    """Probe a package on this host and return the report (``report.exit_code`` is 0 or 1).

    Raises:
        UsageError: the package path or an option is unusable.
    """
    fspath = os.fspath(path)
    _check_options(options)
    public_key = (
        load_public_key(options.public_key) if options.public_key is not None else None
    )  # a bad key file: usage error, before any work
    say = progress or (lambda phase, event: None)
    results: list[PhaseResult] = []
    sections: list[Report] = []
    host: dict[str, Any] = {}
    extra: dict[str, Any] = {"fast": options.fast}
    with tempfile.TemporaryDirectory(prefix="runtime-probe-") as tmp:
        shared = Shared(fspath, options, tmp, public_key=public_key)
        try:
            say("archive", "start")
            started = time.monotonic()
            findings, detail, ok = archive_phase(shared)
            results.append(make_phase("archive", time.monotonic() - started, findings, detail))
            say("archive", results[-1].status)
            if not ok:
                results += _skipped("archive")
            elif options.all_devices:
                sections = _all_devices(shared, say)
                extra["devices"] = [s.title for s in sections]
            else:
                assert shared.archive is not None  # the archive phase passed
                dev_type = package_device(shared.archive, shared.manifest)
                index = None
                if options.device is not None:
                    dev_type, index = parse_device(options.device)
                dev = Device(dev_type, index)
                results += _device_phases(shared, dev, say)
                host = dev.host
                extra["device"] = dev.device
        finally:
            if shared.archive is not None:
                shared.archive.close()
    package: dict[str, Any] = {"path": os.path.abspath(fspath)}
    try:
        package.update(sha256=sha256_file(fspath), bytes=os.path.getsize(fspath))
    except OSError:
        pass
    if shared.manifest is not None:
        m = shared.manifest
        extra["model"] = {
            "inputs": [i.name for i in m.io.inputs],
            "outputs": [o.name for o in m.io.outputs],
            "built_with": m.toolchain.torch,
        }
    return Report(
        kind="probe",
        package=package,
        phases=tuple(results),
        host=host,
        extra=extra,
        sections=tuple(sections),
        tool_version=__version__,
        title=f"probe {os.path.basename(fspath)}",
    )


def _skipped(after: str) -> list[PhaseResult]:
    reason = f"skipped: the {after} phase failed"
    return [make_phase(name, 0.0, [], skipped_reason=reason) for name in PHASES[PHASES.index(after) + 1 :]]


def _new_worker(shared: Shared) -> Worker:
    """A device's child: AOTI's own input checks on, so a wrong input is an error, not garbage."""
    return Worker(env={"AOTI_RUNTIME_CHECK_INPUTS": "1", **shared.options.env}, python=shared.options.python)


def _device_phases(shared: Shared, dev: Device, say: ProgressFn, worker: Worker | None = None) -> list[PhaseResult]:
    """host -> load -> constants -> golden -> escalate for one device (in ``worker``, else a new child)."""
    results: list[PhaseResult] = []
    prefix = f"{dev.label} " if dev.label else ""
    dev.worker = worker or _new_worker(shared)
    dev.worker.submit("facts", device_type=dev.device_type, device_index=dev.device_index)
    try:
        for name, fn in (("host", host_phase), ("load", load_phase), ("constants", constants_phase), ("golden", golden_phase)):
            say(prefix + name, "start")
            started = time.monotonic()
            findings, detail, go_on = fn(shared, dev)
            results.append(make_phase(name, time.monotonic() - started, findings, detail))
            say(prefix + name, results[-1].status)
            if not go_on:
                results += [
                    make_phase(n, 0.0, [], skipped_reason=f"skipped: the {name} phase failed") for n in PHASES[PHASES.index(name) + 1 : -1]
                ]
                break
    finally:
        dev.worker.close()
    results.append(_escalate(shared, dev, say, prefix))
    return results


def _all_devices(shared: Shared, say: ProgressFn) -> list[Report]:
    assert shared.archive is not None  # called after the archive phase passed
    if package_device(shared.archive, shared.manifest) != "cuda":
        raise UsageError("--all-devices probes every visible GPU, but this package targets the CPU", hint="drop --all-devices")
    # the child that counts the GPUs has imported torch already: it goes on as cuda:0's worker
    first = _new_worker(shared)
    counter: Worker | None = first
    try:
        facts = first.request("facts", shared.options.timeout_s, device_type="cuda", device_index=-1)
    except ChildFailure:
        facts = {}
        first.close()
        counter = None  # the device phases start their own child and report what failed
    count = len(facts.get("devices") or [])
    if count == 0:
        dev = Device("cuda", None, "cuda")
        return [
            Report(
                kind="probe",
                package={"path": shared.path},
                phases=tuple(_device_phases(shared, dev, say, counter)),
                host=dev.host,
                title="cuda (no device visible)",
            )
        ]
    devices = [Device("cuda", i, f"cuda:{i}") for i in range(count)]
    phases: dict[int, list[PhaseResult]] = {}

    def run(dev: Device) -> None:
        assert dev.device_index is not None
        phases[dev.device_index] = _device_phases(shared, dev, say, counter if dev.device_index == 0 else None)

    threads = [threading.Thread(target=run, args=(d,), name=d.label) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [
        Report(kind="probe", package={"path": shared.path}, phases=tuple(phases.get(i, [])), host=d.host, title=d.label)
        for i, d in enumerate(devices)
    ]


def _escalate(shared: Shared, dev: Device, say: ProgressFn, prefix: str) -> PhaseResult:
    if dev.replay is None:
        return make_phase("escalate", 0.0, [], skipped_reason="nothing to escalate")
    if not shared.options.escalate:
        return make_phase("escalate", 0.0, [], skipped_reason="--no-escalate")
    assert shared.archive is not None
    say(prefix + "escalate", "start")
    started = time.monotonic()
    ctx = LadderContext(
        path=os.path.abspath(shared.path),
        archive=shared.archive,
        manifest=shared.manifest,
        device_type=dev.device_type,
        device_index=dev.device_index,
        python=shared.options.python,
        env=dict(shared.options.env),
        tmp=tempfile.mkdtemp(dir=shared.tmp, prefix="ladder-"),
        host=dev.host,
        deadline=started + shared.options.escalate_timeout_s,
        step_timeout=shared.options.timeout_s,
        weights=dev.weights_args,
    )
    findings = run_ladder(ctx, dev.replay)
    result = make_phase(
        "escalate",
        time.monotonic() - started,
        findings,
        {"failure": {"stage": dev.replay.stage, "kind": dev.replay.kind}, "steps": ctx.steps},
    )
    say(prefix + "escalate", result.status)
    return result
