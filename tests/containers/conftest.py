"""Fixtures for the container tests: a real Docker engine, the local images, real packages.

Under CI (``CI`` set to a true value, as `.ci/run` runs) or with ``AOTI_GUARD_REQUIRE_DOCKER=1``,
a missing engine or image FAILS these tests: they must never skip silently while CI stays green.
Elsewhere they skip with the reason and the command that fixes it.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# the package fixtures build real packages (once per session per folder; Inductor's cache makes
# the second folder's build a cache hit)
from tests.conftest import wait_for_engines
from tests.integration.conftest import Built, pkg_dir, static_pkg  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
TORCH_IMAGE = "aoti-guard/torch:2.13.0-cpu-py311"
NOTORCH_IMAGE = "aoti-guard/notorch:bookworm-py311"
PREFLIGHT_IMAGE = "aoti-guard/preflight:test"
NOPYTHON_IMAGE = "aoti-guard/test-nopython:1"
NONROOT_IMAGE = "aoti-guard/test-nonroot:1"
FIX = "run `bash scripts/docker/build_base_image.sh` (starts the engine and builds the images)"


def _required() -> bool:
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return ci or os.environ.get("AOTI_GUARD_REQUIRE_DOCKER") == "1"


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"container tests need a Docker engine under CI: {reason}; {FIX}", pytrace=False)
    pytest.skip(f"{reason}; {FIX}")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    wait_for_engines()  # .ci/run makes them in the background
    try:
        import docker
    except ImportError:
        _unavailable("the docker SDK is not installed (pip install 'aoti-guard[containers]')")
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine means "no engine"
        _unavailable(f"no Docker engine answers ({str(exc).splitlines()[0][:200]})")
    for image in (TORCH_IMAGE, NOTORCH_IMAGE):
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            _unavailable(f"image {image} is missing")
    yield client
    client.close()


@pytest.fixture(scope="session")
def preflight_image(docker_client: Any) -> str:
    """The pre-flight image built from this checkout on top of the torch image."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/docker/build_preflight_image.sh"), TORCH_IMAGE, PREFLIGHT_IMAGE],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return PREFLIGHT_IMAGE


@pytest.fixture(scope="session")
def nopython_image(docker_client: Any) -> str:
    """An image with one text file and nothing else (no Python, no shell), made by `docker import`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = b"this image holds no interpreter\n"
        info = tarfile.TarInfo("README")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    repo, tag = NOPYTHON_IMAGE.split(":")
    docker_client.api.import_image_from_data(buf.getvalue(), repository=repo, tag=tag, changes=["LABEL aoti-guard.test=1"])
    return NOPYTHON_IMAGE


@pytest.fixture(scope="session")
def broken_pkg(static_pkg: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """static_pkg with one byte of its .so flipped: the archive phase must refuse it."""
    from tests.integration.test_probe import rewrite

    def flip(name: str, data: bytes) -> bytes:
        if name.endswith(".wrapper.so"):
            middle = len(data) // 2
            return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
        return data

    return rewrite(static_pkg.path, tmp_path_factory.mktemp("broken") / "broken.pt2", flip)


@pytest.fixture(scope="session")
def nonroot_image(docker_client: Any) -> str:
    """The torch image run as an unprivileged user (as many serving images are)."""
    dockerfile = f"FROM {TORCH_IMAGE}\nUSER 65534:65534\nLABEL aoti-guard.test=1\n"
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=NONROOT_IMAGE, rm=True, network_mode="none")
    return NONROOT_IMAGE


def leftover_containers(client: Any, run: str) -> list[str]:
    """Containers of one probe run (by its label), in any state."""
    return [c.id for c in client.containers.list(all=True, filters={"label": f"aoti-guard.run={run}"})]


def aoti_guard(*args: str, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aoti_guard", *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
