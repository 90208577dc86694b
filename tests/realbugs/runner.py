"""Run a realbugs case on both sides and record what happened (cases.py says what should).

- the package: ``python -m aoti_guard build TARGET --json R --no-debug-twin ...``, once per package
  name and run (``tests.integration.conftest.once``: the xdist workers share it, and the ``static``
  and ``noweights`` packages are the integration tests' own);
- bare: torch alone in a child (tests/realbugs/child.py), on the package's release model as
  ``aoti_load_package`` loads it (the build's, or the rejected one it kept), or, where the build
  stopped before compiling, on the model exported and compiled with ``aoti_compile_and_package``
  there: one compile per model either way;
- aoti-guard: the build's findings, ``python -m runtime_probe PKG --json R`` where the case is
  about the probe, and ``runtime_probe.load`` in a child where it is about serving.

Every child has a time limit; one killed by a signal is a ``crash`` (SIGSEGV, SIGABRT...).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.conftest import Built, build_package, once
from tests.tools import zygote

from .cases import Case
from .corpus import PACKAGES

REPO = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 300.0

__all__ = ["BuildResult", "Outcome", "SideResult", "build", "run_case"]


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    text: str  # message and hint


@dataclass(frozen=True)
class BuildResult:
    returncode: int
    findings: tuple[Finding, ...]
    package: str | None  # the release package, or the rejected one; None: nothing compiled
    tail: str = ""

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(f.code for f in self.findings)

    def errors(self) -> tuple[str, ...]:
        return tuple(f.code for f in self.findings if f.severity == "error")


@dataclass(frozen=True)
class SideResult:
    result: str  # ok | wrong | ran | refused | error | crash | timeout | export failed | skipped
    detail: str = ""
    code: str | None = None
    load_s: float | None = None


@dataclass
class Outcome:
    case: Case
    build: BuildResult
    bare: SideResult
    guard: SideResult | None = None
    probe: dict[str, Any] | None = None  # exit code and codes
    seconds: float = 0.0
    torch: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _findings(report: dict[str, Any] | None) -> tuple[Finding, ...]:
    out = []
    for phase in (report or {}).get("phases", []):
        for f in phase.get("findings") or []:
            text = " ".join(str(f.get(k) or "") for k in ("message", "expected", "found", "hint"))
            out.append(Finding(f.get("code", "?"), f.get("severity", "?"), text))
    return tuple(out)


def build(name: str, folder: Path) -> BuildResult:
    """The case's package, built once per run (a ready file in the repository is used as is)."""
    pkg = PACKAGES[name]
    if pkg.file:
        return BuildResult(0, (), str(REPO / pkg.file))
    assert pkg.target is not None
    built: Built = once(folder, name, lambda: build_package(folder, name, str(REPO / pkg.target), *pkg.flags))
    rejected = built.path.with_name(f"{built.path.stem}.rejected.pt2")
    package = built.path if built.path.exists() and built.returncode == 0 else (rejected if rejected.exists() else None)
    return BuildResult(built.returncode, _findings(built.report), str(package) if package else None, (built.stdout + built.stderr)[-2000:])


def _child(side: str, request: dict[str, Any], work: Path, env: dict[str, str] | None = None) -> SideResult:
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"{side}.request.json"
    path.write_text(json.dumps(request))
    argv = [sys.executable, "-m", "tests.realbugs.child", side, str(path)]
    full_env = {**os.environ, **(env or {})}
    try:  # forked by the worker's zygote where it can be (tests/tools/zygote.py), else a fresh process
        proc = zygote.run("tests.realbugs.child", argv[3:], env=full_env, cwd=str(REPO), timeout=CHILD_TIMEOUT_S) or subprocess.run(
            argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=REPO, env=full_env
        )
    except subprocess.TimeoutExpired:
        return SideResult("timeout", f"killed after {CHILD_TIMEOUT_S:.0f} s")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("REALBUGS-RESULT "):
            data = json.loads(line.split(" ", 1)[1])
            detail = data.get("detail", "") + (_isa_warning(proc.stderr) if side == "bare" and request.get("isa") else "")
            return SideResult(data["result"], detail, data.get("code"), data.get("load_s"))
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return SideResult("crash", f"killed by {name}" + _stderr_hint(proc.stderr))
    return SideResult("error", f"exit {proc.returncode}: " + (proc.stderr.strip().splitlines() or ["no output"])[-1][:300])


_LOG_LINE = re.compile(r"^[WIE]\d{4} ")  # glog-style lines torch logs (W1127 06:08:15 ...)


def _stderr_hint(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and "Warning" not in line and not _LOG_LINE.match(line)]
    return f" ({lines[-1][:200]})" if lines else ""


def _isa_warning(stderr: str) -> str:
    """torch's own load-time ISA comparison (#191713): what it said, if anything."""
    for line in stderr.splitlines():
        if "Device information mismatch" in line:
            return "; torch warned: " + line.split("]", 1)[-1].strip()[:160]
    return ""


def _request(case: Case, package: str | None) -> dict[str, Any]:
    pkg = PACKAGES[case.package]
    return {
        "package": package,
        "target": pkg.target,
        "inputs": case.serve.inputs,
        "weights": case.serve.weights,
        "calls": case.serve.calls,
        "eager": case.serve.eager,
        "device": case.serve.device,
        "isa": case.klass == "toolchain/ISA",
    }


def probe(package: str, work: Path, *extra: str) -> dict[str, Any]:
    report = work / "probe.json"
    argv = [sys.executable, "-m", "runtime_probe", package, "--json", str(report), *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=REPO)
    data = json.loads(report.read_text()) if report.exists() else None
    return {
        "returncode": proc.returncode,
        "findings": [asdict(f) for f in _findings(data)],
        "text": json.dumps(data) if data else (proc.stdout + proc.stderr)[-3000:],
    }


def _size_ratio(case: Case, package: str) -> str:
    """The package's size against the bytes its weights hold (#186176)."""
    from .child import _spec

    model = _spec(PACKAGES[case.package].target or "")[0]
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    size = Path(package).stat().st_size
    return f"the package is {size / 2**20:.1f} MiB for {weights / 2**10:.0f} KiB of weights ({size / max(weights, 1):.0f}x)"


def run_case(case: Case, folder: Path) -> Outcome:
    """Both sides of ``case``; the package built (once) in ``folder``."""
    import torch

    start = time.monotonic()
    if case.no_gpu_host and torch.cuda.is_available():
        why = "this host has a GPU; the report's process had none"
        return Outcome(case, BuildResult(0, (), None), SideResult("skipped", why), torch=torch.__version__)
    built = build(case.package, folder)
    work = folder / "cases" / case.name
    env = dict(case.serve.env)
    bare = _child("bare", _request(case, built.package), work, env)
    if case.klass == "package size" and built.package:
        bare = SideResult(bare.result, f"{bare.detail}; {_size_ratio(case, built.package)}", bare.code, bare.load_s)
    outcome = Outcome(case, built, bare, torch=torch.__version__)
    serves = case.expect.stage in ("serve", "runs", "cannot")
    if built.returncode == 0 and built.package and serves:
        outcome.guard = _child("guard", _request(case, built.package), work, env)
    if built.package and case.expect.stage == "probe":
        outcome.probe = probe(built.package, work, *case.expect.probe_args)
    outcome.seconds = time.monotonic() - start
    return outcome
