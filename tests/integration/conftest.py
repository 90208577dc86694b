"""Session fixtures: real AOTI packages, built once per test session on CPU through the CLI.

Each build is a real `aoti-guard build` subprocess (so the fixtures also exercise the entry point,
exit codes and the JSON report). The Inductor cache makes reruns fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
MODELS = HERE / "models.py"


@dataclass
class Built:
    path: Path
    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None


def run_cli(*args: str, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aoti_guard", *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def run_probe(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime_probe", *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def build_package(out_dir: Path, name: str, target: str | None, *extra: str) -> Built:
    out = out_dir / f"{name}.pt2"
    report = out_dir / f"{name}.build.json"
    args = ["build", *([target] if target else []), "-o", str(out), "--json", str(report), *extra]
    proc = run_cli(*args)
    data = json.loads(report.read_text()) if report.exists() else None
    return Built(out, proc.returncode, proc.stdout, proc.stderr, data)


@pytest.fixture(scope="session")
def pkg_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("packages")


@pytest.fixture(scope="session")
def example_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "example", None)
    assert built.returncode == 0, built.stdout + built.stderr
    return built


@pytest.fixture(scope="session")
def static_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "static", f"{MODELS}:static", "--no-debug-twin")
    assert built.returncode == 0, built.stdout + built.stderr
    return built


@pytest.fixture(scope="session")
def mixed_pkg(pkg_dir: Path) -> Built:
    built = build_package(
        pkg_dir, "mixed", f"{MODELS}:mixed", "--no-debug-twin", "--dynamic", "x:0=batch:2..32", "--dynamic", "ids:0=batch"
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return built


@pytest.fixture(scope="session")
def buffers_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "buffers", f"{MODELS}:buffers", "--no-debug-twin")
    assert built.returncode == 0, built.stdout + built.stderr
    return built


@pytest.fixture(scope="session")
def noweights_pkg(pkg_dir: Path) -> Built:
    built = build_package(
        pkg_dir, "noweights", f"{MODELS}:static", "--no-debug-twin", "--inductor-config", "aot_inductor.package_constants_in_so=false"
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return built


def _plain_static_package(path: Path, inductor_configs: dict[str, object] | None = None) -> Path:
    """The static test model exported and packaged by torch alone (no aoti-guard, no manifest)."""
    import torch

    sys.path.insert(0, str(HERE))
    try:
        import models
    finally:
        sys.path.pop(0)
    model, args = models.static()
    ep = torch.export.export(model, args)
    torch._inductor.aoti_compile_and_package(ep, package_path=str(path), inductor_configs=inductor_configs)
    return path


@pytest.fixture(scope="session")
def plain_pkg(pkg_dir: Path) -> Path:
    """A package made by torch alone (no manifest)."""
    return _plain_static_package(pkg_dir / "plain.pt2")


@pytest.fixture(scope="session")
def plain_noweights_pkg(pkg_dir: Path) -> Path:
    """A package made by torch alone without its weights (package_constants_in_so=False), no manifest."""
    return _plain_static_package(pkg_dir / "plain-noweights.pt2", {"aot_inductor.package_constants_in_so": False})


@pytest.fixture(scope="session")
def sqrt_pkg(pkg_dir: Path) -> Built:
    """A model with a debug twin whose output turns NaN on negative inputs."""
    built = build_package(pkg_dir, "sqrt", f"{MODELS}:sqrt_chain")
    assert built.returncode == 0, built.stdout + built.stderr
    return built


@pytest.fixture(scope="session")
def embed_pkg(pkg_dir: Path) -> Built:
    """A token embedding of 1000 rows: its ids input indexes the table."""
    built = build_package(pkg_dir, "embed", f"{MODELS}:embed", "--no-debug-twin")
    assert built.returncode == 0, built.stdout + built.stderr
    return built


@pytest.fixture(scope="session")
def guard_pkg(pkg_dir: Path) -> Callable[[str], Path]:
    """The package of a factory in guard_models.py (issue 25: derived sizes over non-contiguous
    layouts, a tiny DistilBERT), built on first use, once per session, without a debug twin."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            b = build_package(pkg_dir, name, f"{HERE / 'guard_models.py'}:{name}", "--no-debug-twin")
            assert b.returncode == 0, b.stdout[-3000:] + b.stderr[-3000:]
            built[name] = b.path
        return built[name]

    return get
