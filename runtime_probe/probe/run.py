"""The probe: archive -> host -> load -> constants -> golden -> escalate.

Nothing native is opened before the archive phase passed (safe zip, manifest, hashes). Loading and
running happen in one child interpreter (child.Worker) that the host phase also asks for its
facts, so torch is imported once. A failing phase skips the ones that depend on it; a failed load
or run climbs the escalation ladder (escalate.py). With ``all_devices``, every visible GPU is
probed in parallel, one child per device, each in its own report section.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime_probe._version import __version__
from runtime_probe.child.worker import ChildFailure, Worker
from runtime_probe.host.rules import parse_device
from runtime_probe.ladder import memcheck as _memcheck
from runtime_probe.ladder.steps import LadderContext, memcheck_samples, run_ladder
from runtime_probe.package.archive import sha256_file
from runtime_probe.package.private_copy import tmpdir_finding
from runtime_probe.probe.load_log import ENV as LOAD_LOG_ENV
from runtime_probe.probe.options import PHASES, ProbeOptions, ProgressFn
from runtime_probe.probe.phases import (
    Device,
    Phase,
    Shared,
    archive_phase,
    constants_phase,
    golden_phase,
    host_phase,
    load_phase,
    package_device,
)
from runtime_probe.probe.raw_times import write_raw
from runtime_probe.probe.shapes import parse_shapes, shape_sets
from runtime_probe.probe.throughput import parse_threads
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.output import check_report_path, is_stdout
from runtime_probe.reporting.paths import probe_paths
from runtime_probe.reporting.recorder import Recorder, StepFailed, StepResult, run_steps
from runtime_probe.reporting.report import PhaseResult, Report, make_phase
from runtime_probe.runtime import user_modules
from runtime_probe.runtime.terminate import Terminated, signals_raise, terminated_finding
from runtime_probe.trust.signature import load_public_key

__all__ = ["PHASES", "ProbeOptions", "probe"]


def _check_options(options: ProbeOptions) -> None:
    """Every flag combination and value the probe can refuse before it reads the package."""
    _check_verify_only(options)
    _check_paths(options)
    _check_timing(options)
    if options.memcheck and options.no_memcheck:
        raise UsageError(
            "--memcheck and --no-memcheck contradict each other",
            hint="give one of them (neither: memcheck where the manifest records user GPU code)",
        )
    if options.all_devices and options.device not in (None, "cuda"):
        raise UsageError(
            "--all-devices probes every visible GPU; it cannot be combined with a device index", hint="drop --device, or drop --all-devices"
        )


def _check_verify_only(options: ProbeOptions) -> None:
    if options.verify_only:
        for flag, given in (
            ("--weights", options.weights),
            ("--inputs", options.inputs),
            ("--all-devices", options.all_devices),
            ("--iterations", options.iterations != 1),
            ("--duration", options.duration_s is not None),
            ("--shapes", options.shapes),
            ("--latency-raw", options.latency_raw),
            ("--threads", options.threads),
            ("--save-inputs", options.save_inputs),
            ("--save-outputs", options.save_outputs),
            ("--fast", options.fast),
        ):
            if given:
                raise UsageError(
                    f"--verify-only checks the archive alone; {flag} needs the model loaded", hint=f"drop {flag}, or drop --verify-only"
                )


def _check_paths(options: ProbeOptions) -> None:
    for flag, value in (("--device", options.device), ("--inputs-device", options.inputs_device)):
        if value is not None:
            try:
                parse_device(value)
            except ValueError:
                raise UsageError(f"{flag}: unknown device {value!r}", hint="use cpu, cuda or cuda:N") from None
    for flag, value in (("--weights", options.weights), ("--inputs", options.inputs)):
        if value is not None and not os.path.isfile(value):
            # A FIFO, device or socket would hang or never end the read: say so, never open it.
            what = "no such file" if not os.path.exists(value) else "not a regular file (a FIFO, device, socket or folder)"
            raise UsageError(f"{flag}: {what}: {value}", hint=f"{flag} takes a .safetensors file")
    for spec in options.imports or ():
        if user_modules.is_file(spec) and not os.path.isfile(spec):
            raise UsageError(
                f"--import: no such file: {spec}",
                hint="--import takes the .py file (or the module name) that registers the package's custom ops",
            )
    for flag, folder in (("--save-inputs", options.save_inputs), ("--save-outputs", options.save_outputs)):
        if folder is not None:
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"{flag}: cannot create the folder {folder}: {exc.strerror}", hint=f"{flag} takes a folder") from None


def _check_timing(options: ProbeOptions) -> None:
    if options.iterations < 1:
        raise UsageError(f"--iterations must be at least 1 (got {options.iterations})")
    if options.latency_raw is not None:
        if options.iterations == 1 and options.duration_s is None:
            raise UsageError(
                "--latency-raw writes the timed calls' times, and nothing is timed",
                hint="add --iterations N (N > 1) or --duration S",
            )
        if is_stdout(options.latency_raw):  # stdout carries the text report, or --json -
            raise UsageError("--latency-raw needs a file: stdout carries the report", hint="give --latency-raw a file name")
        check_report_path(options.latency_raw, "--latency-raw")
    if options.threads is not None:
        parse_threads(options.threads)  # its syntax, before any work
    for text in shape_sets(options.shapes):
        parse_shapes(text)  # its syntax, before any work; the names once the manifest is read
    if options.warmup < 0:
        raise UsageError(f"--warmup must be at least 0 (got {options.warmup})")
    if options.duration_s is not None and not 0 < options.duration_s < options.timeout_s:
        raise UsageError(
            f"--duration {options.duration_s:g} must be above 0 and below --timeout {options.timeout_s:g}: each golden run, "
            "its timed calls included, must end within --timeout",
            hint=f"give --timeout more than {options.duration_s:g} seconds plus the time of one run",
        )


def probe(path: str | os.PathLike[str], options: ProbeOptions | None = None, progress: ProgressFn | None = None) -> Report:
    """Probe a package on this host and return the report (``report.exit_code`` is 0 or 1).

    Everything is read from one private copy of the package (package/private_copy.py), in a
    temporary folder that is removed on the way out, also after a crash of the child, a timeout,
    an escalation, SIGTERM or SIGHUP (runtime/terminate.py); the children's TMPDIR is inside it.

    Raises:
        UsageError: the package path or an option is unusable.
    """
    fspath = os.fspath(path)
    options = options or ProbeOptions()
    _check_options(options)
    probe_paths(fspath, vars(options), reports=False).check()  # --save-* never overwrite the package, --inputs...
    public_key = (
        load_public_key(options.public_key) if options.public_key is not None else None
    )  # a bad key file: usage error, before any work
    run = _Run(fspath, options, progress or (lambda phase, event: None))
    with signals_raise():
        # TMPDIR as given: tempfile alone would fall back to /tmp (often a small tmpfs) without a
        # word when TMPDIR is read-only or missing, and the package's copies would land there
        where = os.environ.get("TMPDIR") or None
        try:
            tmp = tempfile.mkdtemp(prefix="runtime-probe-", dir=where)
        except OSError as exc:
            finding = tmpdir_finding(exc, os.path.join(where or tempfile.gettempdir(), "runtime-probe-"))
            return run.report([make_phase("archive", 0.0, [finding]), *_skipped("archive")])
        try:
            shared = Shared(fspath, options, tmp, public_key=public_key)
            report = run.probe(shared)
            if options.latency_raw is not None:
                write_raw(options.latency_raw, fspath, shared)
            return report
        except Terminated as exc:  # SIGTERM or SIGHUP: every finally above closed its child
            phase = run.current or "archive"
            return run.report([*run.results, make_phase(phase, 0.0, [terminated_finding(exc, phase, "probe")])])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class _Run:
    """One probe: its phases' results so far, and the phase that is running."""

    path: str
    options: ProbeOptions
    say: ProgressFn
    results: list[PhaseResult] = field(default_factory=list)
    current: str | None = None
    sha256: str | None = None

    def progress(self, phase: str, event: str) -> None:
        if event == "start":
            self.current = phase.rsplit(" ", 1)[-1]
        self.say(phase, event)

    def probe(self, shared: Shared) -> Report:
        say = self.progress
        sections: list[Report] = []
        host: dict[str, Any] = {}
        extra: dict[str, Any] = {"fast": self.options.fast}
        try:
            say("archive", "start")
            started = time.monotonic()
            findings, detail, ok = archive_phase(shared)
            self.results.append(make_phase("archive", time.monotonic() - started, findings, detail))
            say("archive", self.results[-1].status)
            if shared.path != self.path:  # the private copy: what was verified and is loaded
                self.sha256 = sha256_file(shared.path)
            if not ok:
                self.results += _skipped("archive")
            elif self.options.verify_only:
                reason = "skipped: --verify-only checks the archive alone"
                self.results += [make_phase(name, 0.0, [], skipped_reason=reason) for name in PHASES[1:]]
                extra["verify_only"] = True
            elif self.options.all_devices:
                sections = _all_devices(shared, say)
                extra["devices"] = [s.title for s in sections]
            else:
                assert shared.archive is not None  # the archive phase passed
                dev_type = package_device(shared.archive, shared.manifest)
                index = None
                if self.options.device is not None:
                    dev_type, index = parse_device(self.options.device)
                dev = Device(dev_type, index)
                self.results += _device_phases(shared, dev, say)
                host = dev.host
                extra["device"] = dev.device
                if dev.log:
                    extra["log"] = dev.log
        finally:
            if shared.archive is not None:
                shared.archive.close()
        if shared.manifest is not None:
            m = shared.manifest
            extra["model"] = {
                "inputs": [i.name for i in m.io.inputs],
                "outputs": [o.name for o in m.io.outputs],
                "built_with": m.toolchain.torch,
            }
        return self.report(self.results, host=host, extra=extra, sections=sections)

    def report(
        self,
        results: list[PhaseResult],
        *,
        host: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        sections: list[Report] | None = None,
    ) -> Report:
        package: dict[str, Any] = {"path": os.path.abspath(self.path)}
        try:
            package["bytes"] = os.path.getsize(self.path)
        except OSError:
            pass
        if self.sha256 is not None:
            package["sha256"] = self.sha256  # of the bytes that were verified and loaded
        return Report(
            kind="probe",
            package=package,
            phases=tuple(results),
            host=host or {},
            extra=extra or {"fast": self.options.fast},
            sections=tuple(sections or ()),
            tool_version=__version__,
            title=f"probe {os.path.basename(self.path)}",
        )


def _skipped(after: str) -> list[PhaseResult]:
    reason = f"skipped: the {after} phase failed"
    return [make_phase(name, 0.0, [], skipped_reason=reason) for name in PHASES[PHASES.index(after) + 1 :]]


_DEVICE_STEPS = (("host", host_phase), ("load", load_phase), ("constants", constants_phase), ("golden", golden_phase))
DEVICE_PHASES = tuple(name for name, _ in _DEVICE_STEPS)


def _step(name: str, phase: Callable[[Shared, Device], Phase], dev: Device) -> Callable[[Shared], StepResult]:
    """A device phase as a recorder step: ``go_on`` False stops the rest (escalate still runs)."""

    def step(shared: Shared) -> StepResult:
        findings, detail, go_on = phase(shared, dev)
        if not go_on:
            raise StepFailed(findings, f"skipped: the {name} phase failed", detail)
        return findings, detail

    return step


def _child_env(shared: Shared) -> dict[str, str | None]:
    """The options' environment, with TMPDIR inside the probe's own folder: torch's loader
    extracts the package there, and a child that crashes leaves nothing outside it."""
    child_tmp = os.path.join(shared.tmp, "child-tmp")
    os.makedirs(child_tmp, mode=0o700, exist_ok=True)
    return {**shared.options.env, "TMPDIR": child_tmp, **user_modules.child_env(shared.options.imports)}


def _new_worker(shared: Shared) -> Worker:
    """A device's child: AOTI's own input checks on, so a wrong input is an error, not garbage;
    a .so built by torch >= 2.14 logs its constant loads (the load phase's evidence: load_log.py)."""
    return Worker(env={"AOTI_RUNTIME_CHECK_INPUTS": "1", **LOAD_LOG_ENV, **_child_env(shared)}, python=shared.options.python)


# what torch says on the child's stderr: Python warnings ("x.py:105: FutureWarning: ...") and
# torch._logging records ("W1123 12:58:05.350000 18574 x.py:7] ...")
_LOG_LINE = re.compile(r"^\S.*:\d+: [A-Z]\w*Warning: |^[WE]\d{4} \d\d:\d\d:\d\d")


def child_log_lines(stderr: str, limit: int = 200) -> list[str]:
    """The warning and log lines of a child's stderr, each once, for the report and --log-file
    (they never reach the user's terminal: the child's output is captured)."""
    return list(dict.fromkeys(line.rstrip() for line in stderr.splitlines() if _LOG_LINE.search(line)))[:limit]


def _device_phases(shared: Shared, dev: Device, say: ProgressFn, worker: Worker | None = None) -> list[PhaseResult]:
    """host -> load -> constants -> golden -> escalate for one device (in ``worker``, else a new child)."""
    prefix = f"{dev.label} " if dev.label else ""
    recorder = Recorder(DEVICE_PHASES, lambda phase, event, seconds: say(phase, event), label=prefix)
    dev.worker = worker or _new_worker(shared)
    dev.worker.submit("facts", device_type=dev.device_type, device_index=dev.device_index)
    # a package that cannot run (shared.unrunnable): the host is still checked, nothing is loaded
    steps = _DEVICE_STEPS if shared.unrunnable is None else _DEVICE_STEPS[:1]
    try:
        if run_steps(recorder, [(name, _step(name, fn, dev)) for name, fn in steps], shared) and shared.unrunnable is not None:
            recorder.skip_rest(shared.unrunnable)
    finally:
        dev.worker.close()
        dev.log = child_log_lines(dev.worker.stderr.text())
    results = recorder.results
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
                package={"path": shared.source},
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
        Report(kind="probe", package={"path": shared.source}, phases=tuple(phases.get(i, [])), host=d.host, title=d.label)
        for i, d in enumerate(devices)
    ]


def _memcheck_wanted(shared: Shared, dev: Device) -> tuple[bool, str]:
    """Whether the golden samples that passed run once more under memcheck (ladder/memcheck.py's rule)."""
    opts = shared.options
    flag = True if opts.memcheck else False if opts.no_memcheck else None
    user_code = shared.manifest.user_code if shared.manifest is not None else None
    return _memcheck.decide(flag, dev.device_type, user_code)


def _escalate(shared: Shared, dev: Device, say: ProgressFn, prefix: str) -> PhaseResult:
    memcheck, why = _memcheck_wanted(shared, dev) if dev.replay is None and dev.ran else (False, "")
    if dev.replay is None and not memcheck:
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
        env=_child_env(shared),
        tmp=tempfile.mkdtemp(dir=shared.tmp, prefix="ladder-"),
        shown_path=os.path.abspath(shared.source),
        host=dev.host,
        deadline=started + shared.options.escalate_timeout_s,
        step_timeout=shared.options.timeout_s,
        weights=dev.weights_args,
        note=lambda text: say(prefix + "escalate", text),
    )
    if dev.replay is None:  # every sample passed: memcheck them, for user GPU code (ladder/memcheck.py)
        found = memcheck_samples(ctx, [_memcheck.MemcheckRun(label, args) for label, args in dev.ran])
        result = make_phase("escalate", time.monotonic() - started, found, {"memcheck": why, "steps": ctx.steps})
        say(prefix + "escalate", result.status)
        return result
    findings = run_ladder(ctx, dev.replay)
    result = make_phase(
        "escalate",
        time.monotonic() - started,
        findings,
        {"failure": {"stage": dev.replay.stage, "kind": dev.replay.kind}, "steps": ctx.steps},
    )
    say(prefix + "escalate", result.status)
    return result
