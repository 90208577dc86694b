"""The one place that talks to the Docker engine (docker SDK, imported lazily).

It runs one container the way the probe needs it (read-only root, no network, a tmpfs /tmp with
exec, bind mounts that fail on a missing source, a timeout, removal on every path) and turns the
engine's failures into typed exceptions that ``container_probe`` maps to findings. The engine's
quirks these work around are recorded in containers/base/NOTES.md (pitfalls 8-11, 17).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.reporting.errors import ToolError

__all__ = [
    "LABEL",
    "RUN_LABEL",
    "ContainerResult",
    "ContainerSpec",
    "ContainerTimeout",
    "EngineError",
    "EngineUnreachable",
    "ExecutableMissing",
    "GpuRuntimeMissing",
    "ImageMissing",
    "connect",
    "image_facts",
    "run_container",
]

LABEL = "aoti-guard.probe"  # on every container we create: `docker ps -a --filter label=aoti-guard.probe`
RUN_LABEL = "aoti-guard.run"  # one value per probe run (the report's extra.image.container.run)


class EngineError(Exception):
    """The engine refused or failed a request. ``detail``: the engine's own words."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class EngineUnreachable(EngineError):
    """No engine answers at DOCKER_HOST (or the default socket)."""


class ImageMissing(EngineError):
    """The image is not on the engine (we never pull)."""


class GpuRuntimeMissing(EngineError):
    """GPUs were requested but the engine has no runtime that provides them."""


class ExecutableMissing(EngineError):
    """The container's command (the image's Python) does not exist in the image."""


class ContainerTimeout(EngineError):
    """The container ran past its timeout; it was killed. ``stdout``/``stderr``: what it printed."""

    def __init__(self, message: str, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.stdout, self.stderr = stdout, stderr


@dataclass(frozen=True)
class Bind:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class ContainerSpec:
    image: str
    entrypoint: Sequence[str]
    command: Sequence[str]
    binds: Sequence[Bind] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    tmpfs_bytes: int = 1 << 30
    gpus: bool = False


@dataclass(frozen=True)
class ContainerResult:
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    container_id: str


def _sdk() -> Any:
    try:
        import docker
    except ImportError:
        raise ToolError("the docker Python SDK is not installed", hint="pip install 'aoti-guard[containers]'") from None
    return docker


def connect(timeout_s: float = 60.0) -> Any:
    """A client for the engine at DOCKER_HOST (else the default socket). Raises EngineUnreachable."""
    docker = _sdk()
    import requests

    try:
        client = docker.from_env(timeout=int(max(timeout_s, 1)))
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        raise EngineUnreachable("no container engine answers", _first_line(exc)) from None
    return client


def image_facts(client: Any, name: str) -> dict[str, Any]:
    """What the engine knows about a local image. Raises ImageMissing, EngineError."""
    docker = _sdk()
    try:
        image = client.images.get(name)  # never pulls (containers.run would try a registry)
    except docker.errors.ImageNotFound as exc:
        raise ImageMissing(f"no image {name} on this engine", _explanation(exc)) from None
    except docker.errors.APIError as exc:
        raise EngineError(f"the engine could not inspect image {name}", _explanation(exc)) from None
    attrs = image.attrs or {}
    config = attrs.get("Config") or {}
    facts: dict[str, Any] = {
        "name": name,
        "id": image.id,
        "tags": list(image.tags),
        "os": attrs.get("Os"),
        "architecture": attrs.get("Architecture"),
        "created": attrs.get("Created"),
        "user": config.get("User") or "",
        "labels": dict(config.get("Labels") or {}),
    }
    try:
        version = client.version()
        facts["engine"] = {"version": version.get("Version"), "api_version": version.get("ApiVersion")}
    except docker.errors.APIError:
        facts["engine"] = {}
    return facts


def run_container(client: Any, spec: ContainerSpec, timeout_s: float) -> ContainerResult:
    """Create, start and wait for one container; remove it on every path (even Ctrl-C).

    Raises:
        GpuRuntimeMissing, ExecutableMissing: the engine refused to start it (the reason).
        ContainerTimeout: it ran past ``timeout_s`` and was killed.
        EngineError: anything else the engine refused.
    """
    docker = _sdk()
    import requests
    from docker.types import DeviceRequest, Mount

    mounts = [Mount(target=b.target, source=b.source, type="bind", read_only=b.read_only) for b in spec.binds]
    kwargs: dict[str, Any] = {
        "entrypoint": list(spec.entrypoint),
        "command": list(spec.command),
        "mounts": mounts,  # Mount, not volumes=: a missing source is an error, not a new empty dir
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,exec,nosuid,size={spec.tmpfs_bytes}"},  # AOTI dlopens its .so from /tmp
        "environment": dict(spec.environment),
        "labels": {LABEL: "1", **spec.labels},
        "working_dir": "/",
        "detach": True,
    }
    if spec.gpus:
        kwargs["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    try:
        container = client.containers.create(spec.image, **kwargs)  # create never pulls
    except docker.errors.ImageNotFound as exc:
        raise ImageMissing(f"no image {spec.image} on this engine", _explanation(exc)) from None
    except docker.errors.APIError as exc:
        raise EngineError("the engine refused to create the container", _explanation(exc)) from None
    started = time.monotonic()
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise _start_error(exc, spec) from None
        try:
            status = container.wait(timeout=max(1, int(timeout_s)))
        except requests.exceptions.RequestException:  # a read timeout arrives as ConnectionError
            _quietly(container.kill)
            raise ContainerTimeout(
                f"the container ran past its {timeout_s:.0f}s timeout and was killed", _logs(container, True), _logs(container, False)
            ) from None
        return ContainerResult(
            exit_code=int(status.get("StatusCode", -1)),
            stdout=_logs(container, True),
            stderr=_logs(container, False),
            seconds=time.monotonic() - started,
            container_id=container.id,
        )
    except docker.errors.APIError as exc:
        raise EngineError("the engine failed while running the container", _explanation(exc)) from None
    finally:
        _quietly(lambda: container.remove(force=True))


def _start_error(exc: Any, spec: ContainerSpec) -> EngineError:
    text = _explanation(exc)
    low = text.lower()
    if "could not select device driver" in low or ("capabilities" in low and "gpu" in low):
        return GpuRuntimeMissing("the engine cannot give a container GPUs", text)
    if "executable file not found" in low or ("no such file or directory" in low and "exec" in low):
        return ExecutableMissing(f"the image has no {spec.entrypoint[0]}", text)
    return EngineError("the engine refused to start the container", text)


def _logs(container: Any, stdout: bool) -> str:
    try:
        data = container.logs(stdout=stdout, stderr=not stdout)
    except Exception:  # noqa: BLE001 - logs are evidence only; a failure to read them must not hide the result
        return ""
    return bytes(data).decode("utf-8", "replace")


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - cleanup: the container may already be gone
        pass


def _explanation(exc: Any) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return str(text).strip()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
