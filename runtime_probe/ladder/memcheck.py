"""compute-sanitizer memcheck over a package's samples: the one place that runs it and reads it.

Used by the build (each golden sample once, when the program holds user Triton kernels or custom
ops, or with ``--memcheck``), by the probe (the same on a package whose manifest records user code)
and by the escalation ladder's sanitizer step (the failing sample).

Why the caching allocator is off: with it, torch hands a kernel a block inside a larger cached
segment, so a read or write a little past a tensor stays inside memory the process owns and
memcheck reports 0 errors (issue 43: an unmasked ``tl.load`` of a ``torch.library.triton_op``,
every batch whose ``batch*96`` is not a multiple of 1024). With
``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` every tensor is an allocation of its own and the access is
out of bounds. Launches are blocking so that an error is printed while its sample runs.

All samples run in ONE child under the tool (its start and the package's load are paid once);
each sample's errors are the lines the tool printed while that sample ran. A CUDA error ends the
context, so the first sample with an error is the last one run.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.child.worker import ChildFailure, Worker
from runtime_probe.ladder.readers import SanitizerReport, sanitizer_report
from runtime_probe.package.manifest import UserCode
from runtime_probe.reporting.findings import Finding, error, warning

__all__ = ["MEMCHECK_ENV", "MemcheckResult", "MemcheckRun", "MemcheckTarget", "decide", "findings", "prefix", "run_memcheck", "tool"]

# the environment memcheck needs to see an access past a tensor (module docstring)
MEMCHECK_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUDA_LAUNCH_BLOCKING": "1"}
PRINT_LIMIT = 20  # error records the tool prints in full (the summary still counts all)


def decide(flag: bool | None, device_type: str, user_code: UserCode | None) -> tuple[bool, str]:
    """Whether to run memcheck, and why: the one rule the build and the probe share. ``flag``:
    --memcheck (True) / --no-memcheck (False) / neither (None: on where the program holds user GPU
    code). A CPU package never: memcheck checks CUDA kernels, and a CPU package's kernels are C++
    the tool cannot see."""
    if device_type != "cuda":
        return False, "not run: a CPU package (memcheck checks CUDA kernels only)"
    if flag is False:
        return False, "off (--no-memcheck)"
    if flag:
        return True, "--memcheck"
    if user_code is not None and user_code.any:
        return True, f"the program holds {user_code.describe()}"
    return False, "not run: no user Triton kernels or custom ops in the program (--memcheck runs it anyway)"


def tool() -> str | None:
    """compute-sanitizer's path on this host, or None."""
    return shutil.which("compute-sanitizer")


def prefix(path: str) -> list[str]:
    """The argv the child runs under."""
    return [path, "--tool", "memcheck", "--print-limit", str(PRINT_LIMIT)]


@dataclass(frozen=True)
class MemcheckRun:
    """One sample to run: what a finding calls it, the child's ``run`` arguments, its sizes."""

    label: str  # "golden sample b5"
    run_args: Mapping[str, Any]

    @property
    def sizes(self) -> str:
        """The sample's sizes: its symbols ("batch=5"); "static shapes" when it has none."""
        symbols = (self.run_args.get("sample") or {}).get("symbols")
        if symbols is None:
            return "sizes not recorded"
        return ", ".join(f"{k}={v}" for k, v in symbols.items()) or "static shapes"


@dataclass(frozen=True)
class MemcheckTarget:
    """The package model to load under the tool, and how."""

    path: str
    model: str
    device_index: int | None
    env: Mapping[str, str | None] = field(default_factory=dict)
    python: str | None = None
    weights: Mapping[str, Any] | None = None  # the child's load_weights arguments, when the package has none


@dataclass(frozen=True)
class MemcheckResult:
    """What memcheck saw. ``status``: "clean", "errors", "unavailable" (no tool), "failed" (the
    child failed in a way the tool does not explain: ``reason``)."""

    status: str
    seconds: float = 0.0
    ran: tuple[str, ...] = ()  # labels of the samples run, in order
    sample: MemcheckRun | None = None  # the sample whose run printed the errors
    report: SanitizerReport | None = None
    reason: str | None = None
    head: tuple[str, ...] = ()  # the tool's first lines of that sample, for the evidence

    def detail(self) -> dict[str, Any]:
        """For a report's detail: JSON values only."""
        out: dict[str, Any] = {"status": self.status, "seconds": round(self.seconds, 2), "samples": list(self.ran)}
        if self.sample is not None:
            out["sample"] = {"label": self.sample.label, "sizes": self.sample.sizes}
        if self.report is not None:
            out["errors"] = self.report.summary if self.report.summary is not None else len(self.report.errors)
            out["kernels"] = self.report.kernels()
        if self.reason:
            out["reason"] = self.reason
        return out


def run_memcheck(target: MemcheckTarget, runs: Sequence[MemcheckRun], timeout: float, deadline: float | None = None) -> MemcheckResult:
    """Load ``target`` in one child under memcheck and run each sample once; stops at the first
    sample with an error (its context is gone). Never raises for the child's failures."""
    path = tool()
    if path is None:
        return MemcheckResult("unavailable", reason="compute-sanitizer is not on PATH (it comes with the CUDA toolkit)")
    started = time.monotonic()
    worker = Worker(env={**target.env, **MEMCHECK_ENV}, python=target.python, prefix=prefix(path))
    ran: list[str] = []
    mark = 0
    try:

        def step() -> float:
            return timeout if deadline is None else max(1.0, min(timeout, deadline - time.monotonic()))

        worker.request("load", step(), key="m", path=target.path, model_name=target.model, device_index=target.device_index)
        if target.weights is not None:
            worker.request("load_weights", step(), **{**target.weights, "key": "m"})
        for run in runs:
            if deadline is not None and time.monotonic() > deadline:
                break
            mark = len(worker.stdout.text())
            ran.append(run.label)
            failure: ChildFailure | None = None
            try:
                worker.request("run", step(), **{**run.run_args, "key": "m"})
            except ChildFailure as exc:
                failure = exc
            text = worker.stdout.text()[mark:]
            report = sanitizer_report(text)
            if report.errors:
                head = tuple([line for line in text.splitlines() if line.startswith("=========")][:16])
                return MemcheckResult("errors", time.monotonic() - started, tuple(ran), run, report, head=head)
            if failure is not None:
                return MemcheckResult("failed", time.monotonic() - started, tuple(ran), run, reason=str(failure)[:300])
        return MemcheckResult("clean", time.monotonic() - started, tuple(ran))
    except ChildFailure as exc:  # the load: the tool's own lines may say why
        report = sanitizer_report(worker.stdout.text())
        status = "errors" if report.errors else "failed"
        return MemcheckResult(status, time.monotonic() - started, tuple(ran), None, report if report.errors else None, str(exc)[:300])
    finally:
        worker.close()


def findings(result: MemcheckResult, phase: str, code: str, *, what: str) -> list[Finding]:
    """The result as findings: an error naming the kernel, the sample and the sizes; a warning
    when the tool is missing or its child failed (nothing was checked). ``what``: the package
    model, as the message names it ("the release model")."""
    if result.status == "unavailable":
        return [
            warning(
                "env.memcheck_unavailable",
                phase,
                f"{what} holds user GPU code, but compute-sanitizer is not installed here: its memory accesses were not checked",
                expected="compute-sanitizer on PATH",
                found="none",
                hint="install the CUDA toolkit's compute-sanitizer (or put it on PATH), or pass --no-memcheck to skip the check knowingly",
            )
        ]
    if result.status == "failed":
        return [
            warning(
                "env.memcheck_unavailable",
                phase,
                f"memcheck could not check {what}: the child under compute-sanitizer failed without an error of its own: {result.reason}",
                hint="rerun with --memcheck to try again; the samples' own runs were checked without the tool",
                evidence=result.detail(),
            )
        ]
    if result.status != "errors" or result.report is None:
        return []
    return [_error(result, result.report, phase, code, what)]


def _error(result: MemcheckResult, report: SanitizerReport, phase: str, code: str, what: str) -> Finding:
    first = report.errors[0]
    kernels = report.kernels()
    sample = f"{result.sample.label} ({result.sample.sizes})" if result.sample is not None else "loading the package"
    access = f"{first.access} of {first.size} bytes" if first.access else first.kind
    count = report.summary if report.summary is not None else len(report.errors)
    return error(
        code,
        phase,
        f"compute-sanitizer memcheck: {what} made {count} invalid memory access(es) on {sample}; the first: {access} in kernel "
        f"{first.kernel or '?'}" + (f" at {first.location}" if first.location else "") + f" ({first.address or 'address not printed'})",
        expected="every access inside its tensor (0 memcheck errors)",
        found=f"{count} error(s) in {', '.join(f'{k} ({n})' for k, n in kernels.items())}",
        hint=f"{first.kernel or 'the kernel'} reads or writes past its tensor at these sizes: a Triton kernel needs a mask= on every "
        "tl.load/tl.store whose offsets can pass the tensor's numel (offs < n_elements); the same code under the caching allocator "
        "reads a neighbour's memory silently",
        evidence={
            "kernel": first.kernel,
            "sample": result.sample.label if result.sample is not None else None,
            "sizes": result.sample.sizes if result.sample is not None else None,
            "sanitizer": first.__dict__,
            "kernels": kernels,
            "head": list(result.head),
            "env": dict(MEMCHECK_ENV),
        },
    )
