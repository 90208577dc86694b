"""The pre-flight image (containers/preflight/Dockerfile on the torch image) run as a serving container."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Built

pytestmark = [pytest.mark.docker, pytest.mark.integration]

SERVER = ["sh", "-c", "echo SERVER-STARTED; python3 -m runtime_probe.preflight --check"]


def serve(client: Any, image: str, pkg: Path | None, out: Path, command: list[str], *, detach: bool = False) -> Any:
    """Create and start a container of the pre-flight image the way a serving host would."""
    from docker.types import Mount

    os.chmod(out, 0o777)
    mounts = [Mount(target="/preflight", source=str(out), type="bind")]
    if pkg is not None:
        mounts.append(Mount(target="/models/model.pt2", source=str(pkg), type="bind", read_only=True))
    container = client.containers.create(
        image,
        command,
        mounts=mounts,
        environment={"AOTI_PREFLIGHT_REPORT": "/preflight/report.json"},
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": "rw,exec,size=512m"},
        labels={"aoti-guard.test": "preflight"},
        # inherit the image's HEALTHCHECK test, but check every second
        healthcheck={"interval": 1_000_000_000, "timeout": 10_000_000_000, "retries": 1, "start_period": 60_000_000_000},
    )
    container.start()
    return container


def finish(container: Any) -> tuple[int, str, str]:
    try:
        code = int(container.wait(timeout=300)["StatusCode"])
        return code, container.logs(stderr=False).decode(), container.logs(stdout=False).decode()
    finally:
        container.remove(force=True)


def test_good_package_starts_the_server(docker_client: Any, preflight_image: str, static_pkg: Built, tmp_path: Path) -> None:
    code, out, err = finish(serve(docker_client, preflight_image, static_pkg.path, tmp_path, SERVER))
    assert code == 0, out + err
    assert "PASSED" in out and "SERVER-STARTED" in out
    assert "pre-flight passed for /models/model.pt2" in out  # the HEALTHCHECK command, run by the server
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["passed"] and [p["name"] for p in report["phases"]] == ["archive", "host", "load", "constants", "golden", "escalate"]
    assert [r["sample"] for r in next(p for p in report["phases"] if p["name"] == "golden")["detail"]["runs"]] == [
        "example"
    ]  # --fast by default


def test_broken_package_refuses_to_start(docker_client: Any, preflight_image: str, broken_pkg: Path, tmp_path: Path) -> None:
    code, out, err = finish(serve(docker_client, preflight_image, broken_pkg, tmp_path, SERVER))
    assert code == 1
    assert "SERVER-STARTED" not in out
    assert "ERROR archive.hash_mismatch" in out and "FAILED" in out  # readable in `docker logs`
    assert "the server is not started" in err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["passed"] is False and report["exit_code"] == 1
    assert not (tmp_path / "report.json.ok").exists()


def test_missing_package_is_usage_error(docker_client: Any, preflight_image: str, tmp_path: Path) -> None:
    code, out, err = finish(serve(docker_client, preflight_image, None, tmp_path, SERVER))
    assert code == 2 and "SERVER-STARTED" not in out
    assert "no such package" in err


def test_healthcheck_turns_healthy(docker_client: Any, preflight_image: str, static_pkg: Built, tmp_path: Path) -> None:
    container = serve(docker_client, preflight_image, static_pkg.path, tmp_path, ["sleep", "120"])
    try:
        deadline, health = time.monotonic() + 90, ""
        while time.monotonic() < deadline:
            container.reload()
            health = container.attrs["State"].get("Health", {}).get("Status", "")
            if health == "healthy" or container.status == "exited":
                break
            time.sleep(0.5)
        assert health == "healthy", container.logs().decode()[-2000:]
        log = container.attrs["State"]["Health"]["Log"]
        # not healthy while the pre-flight still runs; healthy once it passed and the server runs
        assert log[-1]["ExitCode"] == 0 and "pre-flight passed" in log[-1]["Output"]
        assert all(e["ExitCode"] == 0 or "no passing pre-flight result" in e["Output"] for e in log)
    finally:
        container.remove(force=True)
