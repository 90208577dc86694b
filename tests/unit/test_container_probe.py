"""The container probe without an engine: GPU decision, error mapping, exit codes, lazy imports.

The same paths run against a real engine in tests/containers; here a fake docker client raises
the engine's exact errors (containers/base/NOTES.md) so every mapping is checked in milliseconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aoti_guard.container import docker_run as dr
from aoti_guard.container.probe import ImageProbeOptions, ProbeSource, probe_in_image, target_device, wants_gpus
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import CODES, EXIT_CODES, error, exit_code_of, info
from runtime_probe.reporting.report import Report

docker = pytest.importorskip("docker", reason="the docker SDK is part of the [containers] extra")


@pytest.mark.parametrize(
    ("device", "package_device", "gpus"),
    [
        (None, "cuda", True),
        (None, "cpu", False),
        (None, None, False),  # unreadable package: the container's archive phase will say why
        ("cuda", "cpu", True),  # forced: the probe then reports the mismatch from inside
        ("cuda:1", None, True),
        ("cpu", "cuda", False),
    ],
)
def test_gpus_are_requested_for_cuda(device: str | None, package_device: str | None, gpus: bool) -> None:
    assert wants_gpus(device, package_device) is gpus


def test_probe_flags_reach_the_container(tmp_path: Path) -> None:
    from aoti_guard.container.probe import _probe_args

    pkg = str(tmp_path / "m.pt2")
    plain = _probe_args(pkg, ImageProbeOptions(image="img"))
    assert "--public-key" not in plain and "--no-escalate" not in plain and "--escalate-timeout" not in plain
    args = _probe_args(pkg, ImageProbeOptions(image="img", public_key=str(tmp_path / "k.pub"), escalate_timeout_s=30))
    assert args[args.index("--public-key") + 1] == "/aoti-guard/key/k.pub"
    assert args[args.index("--escalate-timeout") + 1] == "30"
    assert "--no-escalate" in _probe_args(pkg, ImageProbeOptions(image="img", escalate=False, escalate_timeout_s=30))


def test_target_device_of_a_plain_package_reads_its_metadata(tmp_path: Path) -> None:
    import zipfile

    meta = json.dumps({"AOTI_DEVICE_KEY": "cuda"}).encode()
    plain = tmp_path / "plain.pt2"
    with zipfile.ZipFile(plain, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("plain/data/aotinductor/model/m_metadata.json", meta)
    assert target_device(str(plain)) == "cuda"
    # a damaged entry (CRC mismatch: BadZipFile on read) is no crash; the container's probe says why
    damaged = tmp_path / "damaged.pt2"
    damaged.write_bytes(plain.read_bytes().replace(b'"cuda"', b'"cudb"'))
    assert target_device(str(damaged)) in {None, "cpu"}


def test_target_device_of_a_file_that_is_not_a_package(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pt2"
    junk.write_bytes(b"not a zip")
    assert target_device(str(junk)) is None


def test_exit_codes_of_container_findings() -> None:
    assert set(EXIT_CODES) <= set(CODES)
    assert exit_code_of([]) == 0
    assert exit_code_of([info("env.image_probe_injected", "image", "x")]) == 0
    assert exit_code_of([error("env.image_no_torch", "image", "x")]) == 1
    assert exit_code_of([error("env.image_missing", "image", "x")]) == 2
    assert exit_code_of([error("env.engine_unreachable", "image", "x"), error("golden.mismatch", "golden", "y")]) == 3


class _Images:
    def __init__(self, exc: Exception | None) -> None:
        self.exc = exc

    def get(self, name: str) -> Any:
        if self.exc is not None:
            raise self.exc
        return type("Image", (), {"id": "sha256:fake", "tags": [name], "attrs": {"Os": "linux", "Config": {}}})()


class _Container:
    def __init__(self, start_exc: Exception | None, log: list[str]) -> None:
        self.start_exc, self.log, self.id = start_exc, log, "f" * 64

    def start(self) -> None:
        self.log.append("start")
        if self.start_exc is not None:
            raise self.start_exc

    def remove(self, force: bool = False) -> None:
        self.log.append(f"remove force={force}")


class _Containers:
    def __init__(self, start_exc: Exception | None, log: list[str]) -> None:
        self.start_exc, self.log = start_exc, log
        self.kwargs: dict[str, Any] = {}

    def create(self, image: str, **kwargs: Any) -> _Container:
        self.kwargs = kwargs
        self.log.append("create")
        return _Container(self.start_exc, self.log)


class FakeClient:
    def __init__(self, image_exc: Exception | None = None, start_exc: Exception | None = None) -> None:
        self.log: list[str] = []
        self.images = _Images(image_exc)
        self.containers = _Containers(start_exc, self.log)

    def version(self) -> dict[str, str]:
        return {"Version": "20.10.24", "ApiVersion": "1.41"}


def _api_error(status: int, explanation: str) -> Exception:
    response = type("Response", (), {"status_code": status, "reason": "x", "url": "http://engine"})()
    return docker.errors.APIError("500 Server Error", response=response, explanation=explanation)


def _probe(tmp_path: Path, client: FakeClient, **kw: Any) -> Report:
    pkg = tmp_path / "model.pt2"
    pkg.write_bytes(b"not a real package: the fake engine never runs it")
    return probe_in_image(pkg, ImageProbeOptions(image="serving:1", **kw), client=client)


def _codes(report: Report) -> list[str]:
    return [f.code for f in report.findings]


def test_gpu_start_error_becomes_a_finding_and_the_container_is_removed(tmp_path: Path) -> None:
    client = FakeClient(start_exc=_api_error(500, 'could not select device driver "" with capabilities: [[gpu]]'))
    report = _probe(tmp_path, client, device="cuda")
    assert _codes(report) == ["env.gpu_runtime_missing"] and report.exit_code == 3
    assert client.containers.kwargs["device_requests"][0]["Capabilities"] == [["gpu"]]
    assert client.containers.kwargs["device_requests"][0]["Count"] == -1
    assert client.log == ["create", "start", "remove force=True"]
    assert [p.status for p in report.phases] == ["failed"] + ["skipped"] * 6


def test_no_python_in_the_image(tmp_path: Path) -> None:
    text = 'OCI runtime create failed: exec: "python3": executable file not found in $PATH: unknown'
    client = FakeClient(start_exc=_api_error(400, text))
    report = _probe(tmp_path, client)
    assert _codes(report) == ["env.image_no_python"] and report.exit_code == 1
    assert "device_requests" not in client.containers.kwargs  # a CPU probe asks for no GPU
    assert client.log[-1] == "remove force=True"


def test_missing_image_is_exit_2(tmp_path: Path) -> None:
    report = _probe(tmp_path, FakeClient(image_exc=docker.errors.ImageNotFound("No such image: serving:1")))
    assert _codes(report) == ["env.image_missing"] and report.exit_code == 2


def test_container_is_locked_down(tmp_path: Path) -> None:
    client = FakeClient(start_exc=_api_error(500, "some other failure"))
    report = _probe(tmp_path, client, probe_source=ProbeSource.LOCAL)
    kw = client.containers.kwargs
    assert kw["network_mode"] == "none" and kw["read_only"] is True
    assert kw["tmpfs"]["/tmp"].startswith("rw,exec")
    assert kw["labels"][dr.LABEL] == "1" and kw["labels"][dr.RUN_LABEL] == report.extra["image"]["container"]["run"]
    mounts = {m["Target"]: m for m in kw["mounts"]}
    assert mounts["/aoti-guard/package/model.pt2"]["ReadOnly"] is True
    assert mounts["/aoti-guard/probe/runtime_probe"]["ReadOnly"] is True
    assert mounts["/aoti-guard/out"]["ReadOnly"] is False
    assert all(m["Type"] == "bind" for m in kw["mounts"])
    assert kw["entrypoint"][:2] == ["python3", "-c"]
    assert _codes(report) == ["env.container_failed"] and report.exit_code == 3


def test_usage_errors_raise(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such package"):
        probe_in_image(tmp_path / "nope.pt2", ImageProbeOptions(image="x"), client=FakeClient())
    pkg = tmp_path / "m.pt2"
    pkg.write_bytes(b"x")
    with pytest.raises(UsageError, match="unknown device"):
        probe_in_image(pkg, ImageProbeOptions(image="x", device="tpu"), client=FakeClient())


def test_unreachable_engine_is_a_finding_exit_3_no_traceback(tmp_path: Path) -> None:
    pkg = tmp_path / "m.pt2"
    pkg.write_bytes(b"x")
    report_path = tmp_path / "r.json"
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock"}
    proc = subprocess.run(
        [sys.executable, "-m", "aoti_guard", "probe", str(pkg), "--image", "any:1", "--json", str(report_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "env.engine_unreachable" in proc.stdout and "unix:///nonexistent.sock" in proc.stdout
    data = Report.from_dict(json.loads(report_path.read_text()))
    assert [f.code for f in data.findings] == ["env.engine_unreachable"] and data.exit_code == 3


def test_importing_aoti_guard_does_not_import_docker() -> None:
    code = "import sys, aoti_guard, aoti_guard.cli, aoti_guard.container.probe; print('docker' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_the_cli_does_not_import_the_build_side_until_build_runs() -> None:
    # `aoti-guard --help`, probe and inspect start without builder (and all it pulls in)
    code = "import sys, aoti_guard, aoti_guard.cli; print('aoti_guard.builder.pipeline' in sys.modules); aoti_guard.build; print('aoti_guard.builder.pipeline' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]


def test_image_options_without_image_are_usage_errors(tmp_path: Path) -> None:
    pkg = tmp_path / "m.pt2"
    pkg.write_bytes(b"x")
    proc = subprocess.run(
        [sys.executable, "-m", "aoti_guard", "probe", str(pkg), "--probe-source", "local"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "--probe-source only applies with --image" in proc.stderr
