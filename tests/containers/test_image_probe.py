"""`aoti-guard probe PKG --image IMAGE` against a real engine and real images."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.runtime import layout
from tests.integration.conftest import Built, run_probe

from .conftest import NOTORCH_IMAGE, TORCH_IMAGE, aoti_guard, leftover_containers

pytestmark = [pytest.mark.docker, pytest.mark.integration]


def probe_image(pkg: Path, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    report = tmp_path / f"image-report-{len(list(tmp_path.iterdir()))}.json"
    proc = aoti_guard("probe", str(pkg), "--json", str(report), *args)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    return proc, json.loads(report.read_text())


def codes(report: dict[str, Any]) -> list[str]:
    return [f["code"] for p in report["phases"] for f in p["findings"]]


def status(report: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["status"] for p in report["phases"]}


def assert_removed(client: Any, report: dict[str, Any]) -> None:
    run = report["extra"]["image"]["container"]["run"]
    assert leftover_containers(client, run) == [], f"container of run {run} left behind"


def test_good_package_in_the_serving_image_is_the_local_report(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    junit = tmp_path / "image.xml"
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", TORCH_IMAGE, "--junit", str(junit), "-v")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    local_json = tmp_path / "local.json"
    local = run_probe(str(static_pkg.path), "--json", str(local_json))
    assert local.returncode == 0
    here = json.loads(local_json.read_text())
    # same phases with the same outcome and codes, plus the image phase in front
    assert list(status(report)) == ["image", *status(here)]
    assert {k: v for k, v in status(report).items() if k != "image"} == status(here)
    assert [c for c in codes(report) if not c.startswith("env.image_")] == codes(here)
    assert report["passed"] and report["exit_code"] == 0 and report["schema_version"] == here["schema_version"]
    image = report["extra"]["image"]
    assert image["name"] == TORCH_IMAGE and image["id"].startswith("sha256:")
    assert image["probe_source"] == "injected" and "env.image_probe_injected" in codes(report)
    assert image["python_executable"] == "/opt/venv/bin/python3" and image["torch"].startswith("/opt/venv/")
    assert image["gpus_requested"] is False and image["container"]["exit_code"] == 0
    # the host facts are the container's (its hostname is the container's id); the package path is the host's
    assert report["host"]["torch"].startswith("2.13.0") and report["host"]["hostname"] == image["container"]["id"]
    assert report["package"]["path"] == str(static_pkg.path)
    assert report["package"]["sha256"] == here["package"]["sha256"]
    assert report["package"]["path_in_container"] == "/aoti-guard/package/static.pt2"
    assert [c.get("name") for c in ET.parse(junit).getroot().iter("testcase")] == ["image", *status(here)]
    assert "in aoti-guard/torch" in proc.stdout and "PASSED" in proc.stdout
    assert_removed(docker_client, report)


def test_broken_package_fails_in_the_image_as_it_does_here(docker_client: Any, broken_pkg: Path, tmp_path: Path) -> None:
    proc, report = probe_image(broken_pkg, tmp_path, "--image", TORCH_IMAGE, "--fast")
    assert proc.returncode == 1
    assert status(report)["image"] == "passed" and status(report)["archive"] == "failed"
    assert "archive.hash_mismatch" in codes(report) and status(report)["load"] == "skipped"
    assert report["extra"]["fast"] is True
    assert_removed(docker_client, report)


def test_weights_are_mounted_and_checked_in_the_image(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    from tests.integration.test_probe import _weights

    weights = _weights(static_pkg, tmp_path, lambda sd, torch: None)
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", TORCH_IMAGE, "--weights", str(weights), "--fast")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    constants = next(p for p in report["phases"] if p["name"] == "constants")
    assert constants["detail"]["weights"]["same_as_build"] is True
    assert constants["detail"]["weights"]["path"] == "/aoti-guard/weights/weights.safetensors"


def test_public_key_is_enforced_inside_the_image(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    """--public-key must not be dropped on the way into the container: an unsigned package is refused there."""
    pytest.importorskip("cryptography", reason="keygen needs the [signing] extra")
    key = tmp_path / "release.key"
    assert aoti_guard("keygen", str(key)).returncode == 0
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", TORCH_IMAGE, "--public-key", f"{key}.pub", "--fast", "--no-escalate")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert status(report)["image"] == "passed" and status(report)["archive"] == "failed"
    assert "archive.signature_missing" in codes(report) and status(report)["load"] == "skipped"
    assert_removed(docker_client, report)


def test_image_without_torch(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", NOTORCH_IMAGE)
    assert proc.returncode == 1
    assert codes(report) == ["env.image_no_torch"]
    assert list(status(report).values()) == ["failed"] + ["skipped"] * 6
    assert report["extra"]["image"]["python"].startswith("3.11")
    assert "has no torch" in proc.stdout
    assert_removed(docker_client, report)


def test_image_without_python(docker_client: Any, nopython_image: str, static_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", nopython_image)
    assert proc.returncode == 1
    assert codes(report) == ["env.image_no_python"]
    assert "executable file not found" in report["phases"][0]["findings"][0]["found"]
    assert_removed(docker_client, report)


def test_image_without_runtime_probe_when_injection_is_refused(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", TORCH_IMAGE, "--probe-source", "image")
    assert proc.returncode == 1 and codes(report) == ["env.image_no_probe"]
    assert "--probe-source auto" in report["phases"][0]["findings"][0]["hint"]
    assert_removed(docker_client, report)


def test_preflight_image_runs_its_own_runtime_probe(docker_client: Any, preflight_image: str, static_pkg: Built, tmp_path: Path) -> None:
    for source in ("auto", "image"):
        proc, report = probe_image(static_pkg.path, tmp_path, "--image", preflight_image, "--probe-source", source, "--fast")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        image = report["extra"]["image"]
        assert image["probe_source"] == "image" and image["probe_path"].startswith("/opt/aoti-guard/runtime_probe")
        assert "env.image_probe_injected" not in codes(report)


def test_image_with_an_unprivileged_user(docker_client: Any, nonroot_image: str, static_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", nonroot_image, "--fast")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["extra"]["image"]["uid"] == 65534 and report["extra"]["image"]["user"] == "65534:65534"
    assert_removed(docker_client, report)


def test_missing_image_is_exit_2_and_never_pulled(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", "aoti-guard/does-not-exist:0")
    assert proc.returncode == 2 and codes(report) == ["env.image_missing"]
    assert "never pulls" in proc.stdout


def test_cuda_device_requests_gpus_and_this_engine_has_none(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", TORCH_IMAGE, "--device", "cuda")
    assert proc.returncode == 3
    assert codes(report) == ["env.gpu_runtime_missing"]
    finding = report["phases"][0]["findings"][0]
    assert "could not select device driver" in finding["found"] and "--device cuda" in finding["expected"]
    assert report["extra"]["image"]["gpus_requested"] is True
    assert_removed(docker_client, report)  # the start failed after create: still removed


def test_cuda_package_requests_gpus_from_its_manifest(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    """The manifest is not hashed (it holds the hashes), so its target can be edited for this test."""
    cuda = tmp_path / "cuda.pt2"
    with zipfile.ZipFile(static_pkg.path) as zin, zipfile.ZipFile(cuda, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(layout.MANIFEST):
                manifest = json.loads(data)
                manifest["target"]["device_type"] = "cuda"
                data = json.dumps(manifest).encode()
            zout.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data)
    proc, report = probe_image(cuda, tmp_path, "--image", TORCH_IMAGE)
    assert proc.returncode == 3 and codes(report) == ["env.gpu_runtime_missing"]
    assert "the package targets cuda" in report["phases"][0]["findings"][0]["expected"]
    assert_removed(docker_client, report)


def test_container_timeout_kills_and_removes(docker_client: Any, static_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_image(static_pkg.path, tmp_path, "--image", TORCH_IMAGE, "--image-timeout", "1")
    assert proc.returncode == 1
    assert codes(report) == ["env.container_timeout"]
    assert_removed(docker_client, report)


def test_no_probe_container_is_left_behind(docker_client: Any) -> None:
    """Runs after the others in this file: none of our labelled containers may remain."""
    mine = docker_client.containers.list(all=True, filters={"label": "aoti-guard.probe"})
    ours = [c for c in mine if c.labels.get("aoti-guard.package") in {"static.pt2", "broken.pt2", "cuda.pt2"}]
    assert ours == []
