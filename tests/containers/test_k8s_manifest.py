"""The Kubernetes example parses and its parts fit together (it is not applied to a cluster: none here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

try:
    import yaml
except ImportError:  # PyYAML comes with the [test] extra; CI installs it, so only skip elsewhere
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        raise
    pytest.skip("PyYAML is not installed (pip install -e '.[test]')", allow_module_level=True)

MANIFEST = Path(__file__).resolve().parents[2] / "containers/k8s/preflight-deployment.yaml"


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def _mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}


def test_init_container_preflight_and_readiness_share_one_result() -> None:
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    assert len(docs) == 1
    spec = docs[0]["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    (server,) = spec["containers"]
    volumes = {v["name"] for v in spec["volumes"]}
    # the init container runs the pre-flight with no server command: probe, then exit
    assert init["command"] == ["python3", "-m", "runtime_probe.preflight"]
    assert "--fast" in _env(init)["AOTI_PREFLIGHT_ARGS"]
    # readiness is the pre-flight's result for the same package, read from the same volume
    assert server["readinessProbe"]["exec"]["command"] == ["python3", "-m", "runtime_probe.preflight", "--check"]
    for key in ("AOTI_PACKAGE", "AOTI_PREFLIGHT_REPORT"):
        assert _env(init)[key] == _env(server)[key]
    report_dir = str(Path(_env(init)["AOTI_PREFLIGHT_REPORT"]).parent)
    package_dir = str(Path(_env(init)["AOTI_PACKAGE"]).parent)
    for c in (init, server):
        assert set(_mounts(c).values()) <= volumes
        assert _mounts(c)[report_dir] == _mounts(init)[report_dir]
        assert _mounts(c)[package_dir] == _mounts(init)[package_dir]
        assert "/tmp" in _mounts(c)  # AOTI unpacks and dlopens its .so there under a read-only root
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
    # the server does not re-run the pre-flight: it overrides the image's entrypoint
    assert "runtime_probe.preflight" not in " ".join(server["command"])
