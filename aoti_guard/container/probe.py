"""``aoti-guard probe PKG --image IMAGE``: run the probe inside a container of a serving image.

The report is the container's own probe report (``python -m runtime_probe`` run there, read back
from a mounted output folder) with an ``image`` phase in front and the image's facts in
``extra["image"]``. When the image cannot run the probe, the ``image`` phase fails with a finding
saying why and the probe's phases are skipped. Exit codes (``findings.EXIT_CODES``): 1 the image
or the package failed a check (no Python, no torch, no runtime_probe, a container timeout, or any
finding of the probe itself); 2 no such image on the engine; 3 no engine, no GPU runtime, or the
container ended without a readable report.

The container: the package (and ``--weights``) bind-mounted read-only, an output folder
read-write, root filesystem read-only, ``/tmp`` a tmpfs with exec (AOTI dlopens from there), no
network, every GPU requested when the package targets CUDA (or ``--device cuda``), killed after
a timeout, removed on every path, labelled ``aoti-guard.probe``. docs/containers.md has the rest.
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import runtime_probe
from aoti_guard.container import docker_run as dr
from runtime_probe.host.rules import parse_device
from runtime_probe.package.archive import READ_ERRORS, open_archive
from runtime_probe.package.manifest import MAX_MANIFEST_BYTES, ManifestError, parse_manifest
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.probe.phases import package_device
from runtime_probe.probe.run import PHASES
from runtime_probe.reporting.errors import GuardError, UsageError
from runtime_probe.reporting.findings import Finding, error, info
from runtime_probe.reporting.report import PhaseResult, Report, make_phase
from runtime_probe.runtime import layout

__all__ = ["ImageProbeOptions", "ProbeSource", "probe_in_image", "target_device", "wants_gpus"]

PHASE = "image"
IN_PACKAGE_DIR = "/aoti-guard/package"
IN_WEIGHTS_DIR = "/aoti-guard/weights"
IN_KEY_DIR = "/aoti-guard/key"
IN_OUT_DIR = "/aoti-guard/out"
IN_PROBE_PARENT = "/aoti-guard/probe"  # holds runtime_probe/ when this tool's copy is injected
_BOOT = Path(__file__).with_name("boot.py")


class ProbeSource(enum.StrEnum):
    """Which runtime_probe runs in the container."""

    AUTO = "auto"  # the image's own if it has one, else this tool's copy, mounted read-only
    IMAGE = "image"  # the image's own only (what its pre-flight runs); none -> env.image_no_probe
    LOCAL = "local"  # always this tool's copy (ahead of the image's own on PYTHONPATH)


@dataclass(frozen=True)
class ImageProbeOptions:
    """How to probe in a container.

    Attributes:
        image: a local image name or ID (never pulled).
        device, weights, fast, timeout_s, escalate, escalate_timeout_s, public_key: as for a
            local probe (``ProbeOptions``); the weights and the key are mounted read-only.
        container_timeout_s: limit for the whole container run; then it is killed and removed.
        probe_source: which runtime_probe runs (``ProbeSource``).
        python: the interpreter in the image (name on its PATH, or absolute path).
    """

    image: str
    device: str | None = None
    weights: str | None = None
    fast: bool = False
    timeout_s: float = ProbeOptions.timeout_s
    escalate: bool = True
    escalate_timeout_s: float | None = None  # None: the container's probe default
    public_key: str | None = None
    container_timeout_s: float = 900.0
    probe_source: ProbeSource = ProbeSource.AUTO
    python: str = "python3"


ProgressFn = Callable[[str, str], None]


def target_device(path: str) -> str | None:
    """The device type a package was compiled for, read on this host without torch (None: unreadable)."""
    archive, _ = open_archive(path)
    if archive is None:
        return None
    with archive:
        manifest = None
        try:
            if archive.has(layout.MANIFEST):
                manifest = parse_manifest(archive.read(layout.MANIFEST, max_bytes=MAX_MANIFEST_BYTES))
            return package_device(archive, manifest)
        except (ManifestError, *READ_ERRORS):
            return None  # the container's archive phase will say why


def wants_gpus(device: str | None, package_device: str | None) -> bool:
    """Request GPUs for the container when --device names CUDA, or (no --device) the package targets it."""
    if device is not None:
        return parse_device(device)[0] == "cuda"
    return package_device == "cuda"


def probe_in_image(
    path: str | os.PathLike[str], options: ImageProbeOptions, progress: ProgressFn | None = None, *, client: Any = None
) -> Report:
    """Probe a package inside a container of ``options.image`` and return the report.

    Args:
        client: a docker SDK client (default: one for DOCKER_HOST or the default socket).

    Raises:
        UsageError: the package, weights, device or timeouts are unusable.
        ToolError: the docker SDK is not installed.
    """
    pkg = os.path.abspath(os.fspath(path))
    _check_usage(pkg, options)
    say = progress or (lambda phase, event: None)
    say(PHASE, "start")
    started = time.monotonic()
    # the run's label value: find (or prove gone) this run's container with `--filter label=...`
    facts: dict[str, Any] = {"name": options.image, "container": {"run": uuid.uuid4().hex[:16]}}
    own_client = client is None
    try:
        if client is None:
            client = dr.connect()
        facts.update(dr.image_facts(client, options.image))
        facts["gpus_requested"] = wants_gpus(options.device, target_device(pkg))
        inner, findings = _run(client, pkg, options, facts)
    except dr.EngineError as exc:
        inner, findings = None, [_engine_finding(exc, options, facts)]
    finally:
        if own_client and client is not None:
            client.close()
    total = time.monotonic() - started
    facts["seconds"] = round(total, 3)
    # the image phase's own time is the container's overhead: its probe phases carry theirs
    overhead = total - sum(p.seconds for p in inner.phases) if inner is not None else total
    image_phase = make_phase(PHASE, max(overhead, 0.0), findings, facts)
    say(PHASE, image_phase.status)
    return _assemble(pkg, options, image_phase, facts, inner)


def _check_usage(pkg: str, options: ImageProbeOptions) -> None:
    if not os.path.isfile(pkg):
        raise UsageError(f"no such package {pkg}")
    if options.weights is not None and not os.path.isfile(options.weights):
        raise UsageError(f"no weights file {options.weights}", hint="--weights takes a .safetensors file")
    if options.public_key is not None and not os.path.isfile(options.public_key):
        raise UsageError(f"no public key file {options.public_key}", hint="--public-key takes the KEY.pub that aoti-guard keygen wrote")
    if options.device is not None:
        try:
            parse_device(options.device)
        except ValueError:
            raise UsageError(f"unknown device {options.device!r}", hint="use cpu, cuda or cuda:N") from None
    if options.container_timeout_s <= 0 or options.timeout_s <= 0 or (options.escalate_timeout_s or 1) <= 0:
        raise UsageError("timeouts must be positive")
    if not options.image.strip():
        raise UsageError("--image needs an image name")


def _probe_args(pkg: str, options: ImageProbeOptions) -> list[str]:
    args = [f"{IN_PACKAGE_DIR}/{os.path.basename(pkg)}", "--json", f"{IN_OUT_DIR}/report.json", "--timeout", f"{options.timeout_s:g}"]
    if options.fast:
        args.append("--fast")
    if options.device:
        args += ["--device", options.device]
    if options.weights:
        args += ["--weights", f"{IN_WEIGHTS_DIR}/{os.path.basename(options.weights)}"]
    if options.public_key:
        args += ["--public-key", f"{IN_KEY_DIR}/{os.path.basename(options.public_key)}"]
    # flags added only when given, so an image's older runtime_probe still takes the default call
    if not options.escalate:
        args.append("--no-escalate")
    elif options.escalate_timeout_s is not None:
        args += ["--escalate-timeout", f"{options.escalate_timeout_s:g}"]
    return args


def _run(client: Any, pkg: str, options: ImageProbeOptions, facts: dict[str, Any]) -> tuple[Report | None, list[Finding]]:
    out = tempfile.mkdtemp(prefix="aoti-guard-image-")
    try:
        # the image's user may be anyone: let it write here (we can still delete what it wrote)
        os.chmod(out, 0o777)
        binds = [dr.Bind(pkg, f"{IN_PACKAGE_DIR}/{os.path.basename(pkg)}"), dr.Bind(out, IN_OUT_DIR, read_only=False)]
        if options.weights:
            binds.append(dr.Bind(os.path.abspath(options.weights), f"{IN_WEIGHTS_DIR}/{os.path.basename(options.weights)}"))
        if options.public_key:
            binds.append(dr.Bind(os.path.abspath(options.public_key), f"{IN_KEY_DIR}/{os.path.basename(options.public_key)}"))
        if options.probe_source is not ProbeSource.IMAGE:
            binds.append(dr.Bind(os.path.dirname(os.path.abspath(runtime_probe.__file__)), f"{IN_PROBE_PARENT}/runtime_probe"))
        spec = dr.ContainerSpec(
            image=options.image,
            entrypoint=[options.python, "-c", _BOOT.read_text(encoding="utf-8")],
            command=[IN_OUT_DIR, options.probe_source.value, IN_PROBE_PARENT, "--", *_probe_args(pkg, options)],
            binds=binds,
            environment={"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"},
            labels={"aoti-guard.package": os.path.basename(pkg), dr.RUN_LABEL: facts["container"]["run"]},
            # room for the unpacked .so (weights included) and the golden samples
            tmpfs_bytes=2 * os.path.getsize(pkg) + (512 << 20),
            gpus=bool(facts.get("gpus_requested")),
        )
        result = dr.run_container(client, spec, options.container_timeout_s)
        facts["container"].update(exit_code=result.exit_code, seconds=round(result.seconds, 3), id=result.container_id[:12])
        return _read_results(out, result, options, facts)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _read_results(
    out: str, result: dr.ContainerResult, options: ImageProbeOptions, facts: dict[str, Any]
) -> tuple[Report | None, list[Finding]]:
    evidence = {"exit_code": result.exit_code, "stderr_tail": result.stderr[-6000:], "stdout_tail": result.stdout[-3000:]}
    boot = _read_json(os.path.join(out, "facts.json"))
    if boot is None:
        return None, [
            error(
                "env.container_failed",
                PHASE,
                f"the image's {options.python} did not run the probe's bootstrap (container exit code {result.exit_code})",
                found=_last_line(result.stderr) or f"exit code {result.exit_code}",
                hint="see evidence.stderr_tail; --image-python names another interpreter in the image",
                evidence=evidence,
            )
        ]
    facts.update({k: boot.get(k) for k in ("python", "python_executable", "torch", "probe_source", "probe_path", "uid", "gid")})
    status = boot.get("status")
    if status != "probing":
        return None, [_image_finding(str(status), boot, options)]
    findings: list[Finding] = []
    if boot.get("probe_source") == "injected":
        findings.append(
            info(
                "env.image_probe_injected",
                PHASE,
                f"{options.image} has no runtime_probe of its own: this tool's runtime_probe {runtime_probe.__version__} was mounted read-only and run",
                hint="the pre-flight image (containers/preflight) carries its own; --probe-source image refuses to inject",
            )
        )
    data = _read_json(os.path.join(out, "report.json"))
    if data is None:
        findings.append(
            error(
                "env.container_failed",
                PHASE,
                f"the probe in the container ended with exit code {result.exit_code} and wrote no report",
                found=_last_line(result.stderr) or f"exit code {result.exit_code}",
                hint="see evidence.stderr_tail (a usage error or a crash of runtime_probe in the image)",
                evidence=evidence,
            )
        )
        return None, findings
    try:
        inner = Report.from_dict(data)
    except GuardError as exc:  # a newer major schema written by the image's own runtime_probe
        findings.append(error("env.container_failed", PHASE, f"the container's report cannot be read: {exc.message}", hint=exc.hint))
        return None, findings
    except (KeyError, TypeError, ValueError) as exc:
        findings.append(error("env.container_failed", PHASE, f"the container's report is malformed: {exc}", evidence=evidence))
        return None, findings
    facts["runtime_probe"] = inner.tool_version
    return inner, findings


def _image_finding(status: str, boot: dict[str, Any], options: ImageProbeOptions) -> Finding:
    py = f"{boot.get('python_executable')} (Python {boot.get('python')})"
    if status == "python_too_old":
        return error(
            "env.image_python_unsupported",
            PHASE,
            f"{options.image}: {py} is older than runtime_probe supports",
            expected="Python >= 3.11",
            found=str(boot.get("python")),
            hint="serve from an image with Python 3.11+, or name a newer interpreter in it with --image-python",
        )
    if status == "no_torch":
        return error(
            "env.image_no_torch",
            PHASE,
            f"{options.image}: {py} has no torch, so it cannot load an AOTInductor package",
            expected="torch importable",
            found="no module named torch",
            hint="install the torch the package was built with into the image (aoti-guard inspect PKG shows it)",
        )
    if status == "no_probe":
        return error(
            "env.image_no_probe",
            PHASE,
            f"{options.image}: {py} has no runtime_probe and --probe-source image forbids injecting this tool's copy",
            expected="runtime_probe importable in the image",
            found="no module named runtime_probe",
            hint="build the pre-flight image (containers/preflight/Dockerfile) or use --probe-source auto",
        )
    return error("env.container_failed", PHASE, f"the probe's bootstrap in {options.image} ended in state {status!r}")


def _engine_finding(exc: dr.EngineError, options: ImageProbeOptions, facts: dict[str, Any]) -> Finding:
    evidence: dict[str, Any] = {"engine_error": exc.detail} if exc.detail else {}
    if isinstance(exc, dr.EngineUnreachable):
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        return error(
            "env.engine_unreachable",
            PHASE,
            f"no container engine answers at {where}",
            expected="a Docker engine",
            found=exc.detail or "no answer",
            hint="start the engine (scripts/docker/ensure_engine.sh), check DOCKER_HOST and your permission on the socket",
            evidence=evidence,
        )
    if isinstance(exc, dr.ImageMissing):
        return error(
            "env.image_missing",
            PHASE,
            f"no image {options.image} on this engine (aoti-guard never pulls)",
            expected=f"{options.image} in `docker image ls`",
            found="no such image",
            hint=f"docker pull {options.image} (or build it) first; `docker image ls` lists the local images",
            evidence=evidence,
        )
    if isinstance(exc, dr.GpuRuntimeMissing):
        return error(
            "env.gpu_runtime_missing",
            PHASE,
            "the package needs GPUs but this engine cannot give a container any (no GPU runtime)",
            expected="GPUs in the container (" + ("--device " + options.device if options.device else "the package targets cuda") + ")",
            found=exc.detail,
            hint="run on a host with the NVIDIA Container Toolkit (nvidia-ctk runtime configure), or probe a CPU package",
            evidence=evidence,
        )
    if isinstance(exc, dr.ExecutableMissing):
        return error(
            "env.image_no_python",
            PHASE,
            f"{options.image} has no {options.python} to run the probe with",
            expected=f"{options.python} on the image's PATH",
            found=exc.detail,
            hint="serve from an image with Python 3.11+ and torch, or name its interpreter with --image-python",
            evidence=evidence,
        )
    if isinstance(exc, dr.ContainerTimeout):
        evidence.update(stderr_tail=exc.stderr[-6000:], stdout_tail=exc.stdout[-3000:])
        return error(
            "env.container_timeout",
            PHASE,
            f"the probe container did not finish within {options.container_timeout_s:g}s; it was killed and removed",
            hint="raise --image-timeout, or look for a hang in evidence.stderr_tail",
            evidence=evidence,
        )
    return error("env.container_failed", PHASE, f"{exc}: {exc.detail}", hint="see the engine's message in evidence", evidence=evidence)


def _assemble(pkg: str, options: ImageProbeOptions, image_phase: PhaseResult, facts: dict[str, Any], inner: Report | None) -> Report:
    title = f"probe {os.path.basename(pkg)} in {options.image}"
    if inner is not None:
        seen = {**inner.package, "path": pkg, "path_in_container": inner.package.get("path")}
        return replace(inner, phases=(image_phase, *inner.phases), package=seen, extra={**inner.extra, "image": facts}, title=title)
    reason = "skipped: the image phase failed"
    skipped = tuple(make_phase(name, 0.0, [], skipped_reason=reason) for name in PHASES)
    package: dict[str, Any] = {"path": pkg}
    try:
        package["bytes"] = os.path.getsize(pkg)
    except OSError:
        pass
    return Report(
        kind="probe",
        package=package,
        phases=(image_phase, *skipped),
        extra={"image": facts, "device": options.device, "fast": options.fast},
        tool_version=runtime_probe.__version__,
        title=title,
    )


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
