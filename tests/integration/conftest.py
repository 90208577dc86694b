"""Session fixtures: real AOTI packages, built once per test RUN on CPU through the CLI.

Each build is a real `aoti-guard build` subprocess (so the fixtures also exercise the entry point,
exit codes and the JSON report). Under pytest-xdist every worker is a session of its own: the
packages live in a folder the workers share (the run's base temp), and the first worker to ask
for one builds it under a file lock while the others wait for it and then read it (`once`). The
Inductor cache makes reruns fast. A test that changes a package copies it first.
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
from filelock import FileLock

from tests.conftest import shared_dir
from tests.tools import zygote

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
    """``python -m aoti_guard ARGS``; a build is forked by the worker's zygote where it can be
    (tests/tools/zygote.py: the same command line without paying for torch's imports again)."""
    full_env = {**os.environ, **(env or {})}
    if args and args[0] == "build":
        forked = zygote.run("aoti_guard", list(args), env=full_env, timeout=timeout)
        if forked is not None:
            return forked
    return subprocess.run([sys.executable, "-m", "aoti_guard", *args], capture_output=True, text=True, timeout=timeout, env=full_env)


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


def march_lever() -> bool:
    """This torch can build for a CPU level: Inductor's ``cpp.march`` (2.12+; torch 2.11 hard-codes
    -march=native, and the build then refuses ``--cpu-isa`` and builds its default for the build host)."""
    from aoti_guard.builder.compile.aoti import has_config

    return has_config("cpp.march")


def once(folder: Path, name: str, make: Callable[[], Any]) -> Any:
    """``make()``'s result, made once per run across the xdist workers: the first caller makes it
    under ``folder/NAME.lock`` and records it in ``NAME.result.json``; the others read that."""
    record = folder / f"{name}.result.json"
    with FileLock(str(folder / f"{name}.lock")):
        if record.exists():
            data = json.loads(record.read_text())
            return (
                Built(Path(data["path"]), data["returncode"], data["stdout"], data["stderr"], data["report"])
                if data["built"]
                else Path(data["path"])
            )
        made = make()
        if isinstance(made, Built):
            data = {
                "built": True,
                "path": str(made.path),
                "returncode": made.returncode,
                "stdout": made.stdout,
                "stderr": made.stderr,
                "report": made.report,
            }
        else:
            data = {"built": False, "path": str(made)}
        record.write_text(json.dumps(data))
        return made


@pytest.fixture(scope="session")
def pkg_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_dir(tmp_path_factory, "packages")


def shared_build(pkg_dir: Path, name: str, target: str | None, *extra: str) -> Built:
    """``build_package`` once per run (``once``); the build must pass."""
    built: Built = once(pkg_dir, name, lambda: build_package(pkg_dir, name, target, *extra))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return built


@pytest.fixture(scope="session")
def example_pkg(pkg_dir: Path) -> Built:
    return shared_build(pkg_dir, "example", None)


@pytest.fixture(scope="session")
def static_pkg(pkg_dir: Path) -> Built:
    return shared_build(pkg_dir, "static", f"{MODELS}:static", "--no-debug-twin")


@pytest.fixture(scope="session")
def mixed_pkg(pkg_dir: Path) -> Built:
    return shared_build(pkg_dir, "mixed", f"{MODELS}:mixed", "--no-debug-twin", "--dynamic", "x:0=batch:2..32", "--dynamic", "ids:0=batch")


@pytest.fixture(scope="session")
def buffers_pkg(pkg_dir: Path) -> Built:
    return shared_build(pkg_dir, "buffers", f"{MODELS}:buffers", "--no-debug-twin")


@pytest.fixture(scope="session")
def noweights_pkg(pkg_dir: Path) -> Built:
    return shared_build(
        pkg_dir, "noweights", f"{MODELS}:static", "--no-debug-twin", "--inductor-config", "aot_inductor.package_constants_in_so=false"
    )


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
    return once(pkg_dir, "plain", lambda: _plain_static_package(pkg_dir / "plain.pt2"))  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def plain_noweights_pkg(pkg_dir: Path) -> Path:
    """A package made by torch alone without its weights (package_constants_in_so=False), no manifest."""
    return once(  # type: ignore[no-any-return]
        pkg_dir,
        "plain-noweights",
        lambda: _plain_static_package(pkg_dir / "plain-noweights.pt2", {"aot_inductor.package_constants_in_so": False}),
    )


@pytest.fixture(scope="session")
def masked_nan_pkg(pkg_dir: Path) -> Built:
    """An additive causal mask that holds -inf by design and a sqrt that turns NaN on a negative input (issue 26)."""
    return shared_build(pkg_dir, "masked_nan", f"{MODELS}:masked_nan")


@pytest.fixture(scope="session")
def sqrt_pkg(pkg_dir: Path) -> Built:
    """A model with a debug twin whose output turns NaN on negative inputs."""
    return shared_build(pkg_dir, "sqrt", f"{MODELS}:sqrt_chain")


@pytest.fixture(scope="session")
def embed_pkg(pkg_dir: Path) -> Built:
    """A token embedding of 1000 rows: its ids input indexes the table."""
    return shared_build(pkg_dir, "embed", f"{MODELS}:embed", "--no-debug-twin")


@pytest.fixture(scope="session")
def guard_pkg(pkg_dir: Path) -> Callable[[str], Path]:
    """The package of a factory in guard_models.py (issue 25: derived sizes over non-contiguous
    layouts, a tiny DistilBERT), built on first use, once per session, without a debug twin."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = shared_build(pkg_dir, name, f"{HERE / 'guard_models.py'}:{name}", "--no-debug-twin").path
        return built[name]

    return get
