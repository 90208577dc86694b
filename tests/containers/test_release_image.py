"""The release-pipeline image: `aoti-guard build` inside it, then the result probed in the serving image."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, TORCH_IMAGE, aoti_guard

pytestmark = [pytest.mark.docker, pytest.mark.integration]

RELEASE_IMAGE = "aoti-guard/release:test"


def test_build_in_the_release_image_then_probe_in_the_serving_image(docker_client: Any, tmp_path: Path) -> None:
    from docker.types import Mount

    proc = subprocess.run(
        ["bash", str(REPO / "scripts/docker/build_release_image.sh"), TORCH_IMAGE, RELEASE_IMAGE],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    models = REPO / "tests/integration/models.py"
    container = docker_client.containers.create(
        RELEASE_IMAGE,
        ["build", "/src/models.py:static", "-o", "/out/static.pt2", "--no-debug-twin", "--json", "/out/build.json", "-q"],
        mounts=[
            Mount(target="/src/models.py", source=str(models), type="bind", read_only=True),
            Mount(target="/out", source=str(out), type="bind"),
        ],
        network_mode="none",
        labels={"aoti-guard.test": "release"},
    )
    try:
        container.start()
        code = int(container.wait(timeout=900)["StatusCode"])
        logs = container.logs().decode()
    finally:
        container.remove(force=True)
    assert code == 0, logs[-3000:]
    build = json.loads((out / "build.json").read_text())
    assert build["passed"] and build["kind"] == "build"
    probe = aoti_guard("probe", str(out / "static.pt2"), "--image", TORCH_IMAGE, "--fast", "-q")
    assert probe.returncode == 0, probe.stdout + probe.stderr
