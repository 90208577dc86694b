"""The escalation ladder: when loading or running fails, rerun the case in fresh children with more
instruments until the cause has a name. No recompilation: the debug twin is in the package.

1. strict: AOTI_RUNTIME_CHECK_INPUTS=1 (and on CUDA: CUDA_LAUNCH_BLOCKING=1,
   PYTORCH_NO_CUDA_MEMORY_CACHING=1), so errors surface at the faulting call and inputs are checked.
2. twin: the debug twin (AOTI's value printer) on the same inputs: the kernel that was running at
   a fault, the first NaN (or Inf the build's golden samples did not hold) and the kernel that
   wrote it (ladder/printer.py).
3. sanitizer: compute-sanitizer memcheck's errors, caching allocator off (CUDA faults, where it is
   installed; ladder/memcheck.py, which the build and the probe's memcheck of user GPU code use too).
4. native: a backtrace under gdb or cuda-gdb (batch mode) for a crash, its frames classified.
5. remedy: where the cause has a safe candidate fix (preloading a C++ runtime), try it in a child
   and report whether the package then loads and passes, with the exact environment to apply.
Each step's evidence goes into the report; the whole ladder is bounded by a deadline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.child.messages import cuda_error, input_check
from runtime_probe.child.worker import ChildCrashed, ChildFailure, ChildRaised, ChildTimeout, Worker
from runtime_probe.formats import elf as _elf
from runtime_probe.ladder import memcheck as _memcheck
from runtime_probe.ladder import readers as _diagnose
from runtime_probe.ladder.findings import TwinContext, native_findings, tail, twin_findings
from runtime_probe.package.archive import Archive
from runtime_probe.package.manifest import Manifest
from runtime_probe.package.twin import materialize_twin, twin_constants_from
from runtime_probe.reporting.findings import Finding, Severity, error, info, warning
from runtime_probe.runtime import layout

__all__ = ["LadderContext", "Replay", "memcheck_samples", "no_verdict", "run_ladder"]

PHASE = "escalate"


@dataclass(frozen=True)
class Replay:
    """How to redo the failing case: load only, or load and run one sample."""

    stage: str  # "load" | "run"
    kind: str  # "crash" | "error" | "timeout" | "nonfinite" | "mismatch"
    run_args: Mapping[str, Any] | None = None  # the op_run arguments of the failing sample
    sample: str | None = None  # what the failing run was given: "golden sample example", "the --inputs"


@dataclass
class LadderContext:
    path: str
    archive: Archive
    manifest: Manifest | None
    device_type: str
    device_index: int | None
    python: str | None
    env: Mapping[str, str | None]
    tmp: str
    host: Mapping[str, Any]
    deadline: float
    step_timeout: float
    weights: Mapping[str, Any] | None = None  # op load_weights arguments, when the probe loaded --weights
    shown_path: str | None = None  # the package as the user named it (``path`` may be a private copy)
    built_with: str | None = None  # the build's C++ compiler, where no manifest says it (the build's own diagnosis)
    steps: list[dict[str, Any]] = field(default_factory=list)
    note: Callable[[str], None] | None = None  # progress: called as each step starts

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def timeout(self) -> float:
        return max(1.0, min(self.step_timeout, self.remaining()))


@dataclass
class _Outcome:
    ok: bool
    stdout: str = ""
    stderr: str = ""
    failure: ChildFailure | None = None
    result: Any = None
    under: str | None = None  # the debugger or sanitizer the child ran under

    @property
    def text(self) -> str:
        return self.stdout + "\n" + self.stderr

    def describe(self) -> str:
        if self.ok:
            return "passed"
        if isinstance(self.failure, ChildCrashed) and self.under:
            # the exit code is the tool's (gdb -batch exits 0 after a crash): say what its program did
            fate = _diagnose.debugger_outcome(self.text)
            tool = self.failure.signal or f"exit {self.failure.returncode}"
            return f"crashed ({fate}, under {self.under})" if fate else f"ended under {self.under} ({self.under}: {tool})"
        if isinstance(self.failure, ChildCrashed):
            return f"crashed ({self.failure.signal or f'exit {self.failure.returncode}'})"
        if isinstance(self.failure, ChildTimeout):
            return "timed out"
        if isinstance(self.failure, ChildRaised):
            return f"raised {self.failure.error_type}"
        if isinstance(self.result, dict) and _nonfinite(self.result):
            return "non-finite output"
        return "failed"


def _strict_env(ctx: LadderContext) -> dict[str, str | None]:
    env: dict[str, str | None] = {**ctx.env, "AOTI_RUNTIME_CHECK_INPUTS": "1"}
    if ctx.device_type == "cuda":
        env.update(CUDA_LAUNCH_BLOCKING="1", PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    return env


@dataclass(frozen=True)
class _Target:
    """The package model a step loads: its file, its name, and ``constants_from`` when its
    weights are another package model's (a twin without its own)."""

    path: str
    model: str
    constants_from: Mapping[str, str] | None = None


def _attempt(ctx: LadderContext, replay: Replay, target: _Target, *, env: Mapping[str, str | None], prefix: Sequence[str] = ()) -> _Outcome:
    """Load ``target`` (and run the sample) in a fresh child; never raises for the child's failures."""
    worker = Worker(env=env, python=ctx.python, prefix=prefix)
    under = os.path.basename(prefix[0]) if prefix else None
    out_mark = err_mark = 0
    try:
        load_args = {"constants_from": dict(target.constants_from)} if target.constants_from is not None else {}
        worker.request(
            "load", ctx.timeout(), key="m", path=target.path, model_name=target.model, device_index=ctx.device_index, **load_args
        )
        if ctx.weights is not None:
            worker.request("load_weights", ctx.timeout(), **{**ctx.weights, "key": "m"})
        result = None
        if replay.stage == "run" and replay.run_args is not None:
            result = worker.request("run", ctx.timeout(), **{**replay.run_args, "key": "m"})
            if isinstance(result, dict) and _nonfinite(result):
                return _Outcome(False, worker.stdout.since(out_mark), worker.stderr.since(err_mark), None, result, under)
        return _Outcome(True, worker.stdout.since(out_mark), worker.stderr.since(err_mark), None, result, under)
    except ChildFailure as exc:
        return _Outcome(False, worker.stdout.text(), worker.stderr.text(), exc, under=under)
    finally:
        worker.close()


def _nonfinite(result: Mapping[str, Any]) -> bool:
    return any(o.get("nonfinite") and not o.get("ref_nonfinite") for o in (result.get("outputs") or {}).values())


def _begin(ctx: LadderContext, label: str) -> float:
    """A step starts: say so (the live progress line shows it with its running time)."""
    if ctx.note is not None:
        ctx.note(label)
    return time.monotonic()


def _record(ctx: LadderContext, name: str, started: float, outcome: _Outcome | str | None, evidence: Mapping[str, Any]) -> None:
    ctx.steps.append(
        {
            "step": name,
            "seconds": round(time.monotonic() - started, 2),
            "outcome": outcome if isinstance(outcome, str) else outcome.describe() if outcome else "skipped",
            "evidence": dict(evidence),
        }
    )


def _input_name(ctx: LadderContext, index: int) -> str:
    return ctx.manifest.io.tensor_input_name(index) if ctx.manifest is not None else f"input {index}"


def _classify_text(ctx: LadderContext, outcome: _Outcome, step: str) -> list[Finding]:
    findings: list[Finding] = []
    check = input_check(outcome.text)
    if check is not None:
        name = _input_name(ctx, check.index)
        findings.append(
            error(
                check.code,
                PHASE,
                f"{name}: AOTI's own input check rejected it: {check.line}",
                expected="inputs within the compiled contract",
                found=check.line,
                hint=f"fix the caller; runtime_probe.load() rejects this before native code runs (argument {name!r})",
                evidence={"argument": name, "step": step},
            )
        )
    cuda = cuda_error(outcome.text)
    if cuda is not None:
        code, line = cuda
        what = {
            "run.illegal_memory_access": "a kernel accessed memory out of bounds",
            "run.device_assert": "a device-side assertion fired",
            "env.arch_mismatch": "no kernel image fits this GPU",
        }.get(code, "CUDA error")
        findings.append(
            error(
                code,
                PHASE,
                f"with blocking launches, {what}: {line}",
                found=line,
                hint="the twin and sanitizer steps name the kernel",
                evidence={"step": step, "line": line},
            )
        )
    return findings


def run_ladder(ctx: LadderContext, replay: Replay) -> list[Finding]:
    """Climb the ladder for one failure; returns the findings that name its cause."""
    findings: list[Finding] = []
    release = ctx.manifest.model_name if ctx.manifest else layout.RELEASE_MODEL

    # 1. strict rerun
    started = _begin(ctx, "step 1 strict rerun")
    strict = _attempt(ctx, replay, _Target(ctx.path, release), env=_strict_env(ctx))
    named = _classify_text(ctx, strict, "strict")
    _record(
        ctx,
        "strict",
        started,
        strict,
        {"env": {k: v for k, v in _strict_env(ctx).items() if k not in ctx.env}, "native": tail(strict.stderr)},
    )
    findings += named
    if strict.ok and replay.kind in ("crash", "error", "timeout"):
        findings.append(
            warning(
                f"{replay.stage}.{replay.kind}" if replay.kind != "error" else f"{replay.stage}.error",
                PHASE,
                "the failure did not reproduce with blocking launches, no caching allocator and input checks: it may be intermittent or timing-dependent",
                hint="run the probe several times; an intermittent fault is often a race or an uninitialised read",
            )
        )
    if any(f.code.startswith("input.") for f in named):
        return findings  # the caller's inputs are the cause: instruments on the kernels add nothing

    # 2. the debug twin
    if replay.stage == "run" and ctx.remaining() > 5:
        findings += _twin_step(ctx, replay)

    # 3. compute-sanitizer
    crashed_or_ima = isinstance(strict.failure, ChildCrashed) or any(f.code == "run.illegal_memory_access" for f in findings)
    if ctx.device_type == "cuda" and replay.stage == "run" and crashed_or_ima and ctx.remaining() > 10:
        findings += _sanitizer_step(ctx, replay, release)

    # 4. native backtrace, 5. remedies: for crashes no instrument has explained yet (a kernel
    # already named by the twin or the sanitizer is the cause; its host frames add nothing).
    kernel_named = any(f.evidence.get("kernel") for f in findings)
    if (isinstance(strict.failure, ChildCrashed) or replay.kind == "crash") and not kernel_named:
        cause = None
        if ctx.remaining() > 10:
            cause_findings, cause = _native_step(ctx, replay, release)
            findings += cause_findings
        if ctx.remaining() > 10:
            findings += _remedy_step(ctx, replay, release, cause)
    if not any(f.severity is Severity.ERROR for f in findings):
        findings.append(no_verdict(replay, ctx.steps))
    return findings


def no_verdict(replay: Replay, steps: Sequence[Mapping[str, Any]]) -> Finding:
    """The ladder ran and named nothing: an error, so the phase never reads as passed. It says
    which steps ran and how each ended (``steps``: the ladder's records)."""
    tried = []
    for s in steps:
        why = s.get("evidence", {}).get("reason")
        tried.append(f"{s.get('step')} ({s.get('outcome')}{': ' + str(why) if why else ''})")
    what = {"nonfinite": "non-finite output", "mismatch": "mismatch"}.get(replay.kind, replay.kind)
    on = f" of {replay.sample}" if replay.sample else ""
    return error(
        "escalate.no_verdict",
        PHASE,
        f"the escalation named no cause for the {replay.stage} {what}{on}; tried: {', '.join(tried) or 'nothing (no time left)'}",
        expected="a step that names the kernel, buffer, input or library at fault",
        found="no step named one",
        hint="the failure stands (see the phases above); the steps' evidence is in this phase's detail. A mismatch with "
        "finite values has no instrument here: the build's stage bisection (aoti-guard build) names the stage that departs",
        evidence={"tried": [dict(s) for s in steps], "failure": {"stage": replay.stage, "kind": replay.kind}},
    )


def _twin_step(ctx: LadderContext, replay: Replay) -> list[Finding]:
    started = _begin(ctx, "step 2 debug twin")
    if ctx.manifest is None or ctx.manifest.twin is None:
        _record(ctx, "twin", started, None, {"reason": "the package has no debug twin (built with --no-debug-twin, or not by aoti-guard)"})
        return []
    folder = os.path.join(ctx.tmp, "twin")
    os.makedirs(folder, exist_ok=True)
    twin_path = materialize_twin(ctx.archive, ctx.manifest, folder)
    if twin_path is None:
        _record(ctx, "twin", started, None, {"reason": "the twin's files are missing from the archive"})
        return []
    target = _Target(twin_path, ctx.manifest.twin.model_name, twin_constants_from(ctx.path, ctx.manifest))
    outcome = _attempt(ctx, replay, target, env=_strict_env(ctx))
    crash = outcome.failure.signal if isinstance(outcome.failure, ChildCrashed) else None
    recorded = ctx.manifest.twin.nonfinite
    findings, evidence = twin_findings(
        outcome.stdout,
        outcome.stderr,
        replay_kind=replay.kind,
        device_type=ctx.device_type,
        crash_signal=crash,
        context=TwinContext(
            baseline=recorded.names if recorded is not None else None,
            input_name=lambda i: _input_name(ctx, i),
            sample=replay.sample,
        ),
    )
    _record(ctx, "twin", started, outcome, evidence)
    return findings


def _sanitizer_step(ctx: LadderContext, replay: Replay, release: str) -> list[Finding]:
    started = _begin(ctx, "step 3 compute-sanitizer")
    run = _memcheck.MemcheckRun(replay.sample or "the failing run", replay.run_args or {})
    result = _memcheck.run_memcheck(_memcheck_target(ctx, release), [run], ctx.timeout(), ctx.deadline)
    _record(
        ctx, "sanitizer", started, result.status if result.status != "unavailable" else None, {**result.detail(), "head": list(result.head)}
    )
    if result.status != "errors":
        return []  # a crash the tool does not explain, or no tool: the next steps look at it
    return _memcheck.findings(result, PHASE, "run.illegal_memory_access", what="the package")


def _memcheck_target(ctx: LadderContext, release: str) -> _memcheck.MemcheckTarget:
    return _memcheck.MemcheckTarget(ctx.path, release, ctx.device_index, ctx.env, ctx.python, ctx.weights)


def memcheck_samples(ctx: LadderContext, runs: Sequence[_memcheck.MemcheckRun]) -> list[Finding]:
    """The samples that passed, rerun once under compute-sanitizer memcheck with the caching
    allocator off (ladder/memcheck.py): for a package whose manifest records user GPU code, whose
    out-of-bounds access passes every golden comparison (eager ran the same kernel at build time)."""
    started = _begin(ctx, "memcheck on the golden samples")
    release = ctx.manifest.model_name if ctx.manifest else layout.RELEASE_MODEL
    result = _memcheck.run_memcheck(_memcheck_target(ctx, release), runs, ctx.timeout(), ctx.deadline)
    _record(ctx, "memcheck", started, result.status, {**result.detail(), "head": list(result.head)})
    return _memcheck.findings(result, PHASE, "run.out_of_bounds", what="the package")


def _debugger() -> list[str] | None:
    for name in ("gdb", "cuda-gdb"):
        path = shutil.which(name)
        if path:
            return [path, "-batch", "-nx", "-ex", "set pagination off", "-ex", "set confirm off", "-ex", "run", "-ex", "bt", "--args"]
    return None


def _so_facts(ctx: LadderContext, model_prefix: str) -> dict[str, Any]:
    for e in ctx.archive.under(model_prefix):
        if e.rel.endswith(".so"):
            try:
                info_ = _elf.parse_elf(ctx.archive.view(e.rel))
            except (ValueError, _elf.ElfError):
                return {}
            links = any("libstdc++" in n for n in info_.needed)
            return {
                "file": e.rel.rsplit("/", 1)[-1],
                "links_libstdcxx": links,
                "needed": list(info_.needed),
                "glibcxx": _elf.max_version([v for vs in info_.version_needs.values() for v in vs], "GLIBCXX"),
            }
    return {}


def _native_step(ctx: LadderContext, replay: Replay, release: str) -> tuple[list[Finding], str | None]:
    started = _begin(ctx, "step 4 native backtrace")
    prefix = _debugger()
    if prefix is None:
        _record(ctx, "native", started, None, {"reason": "no gdb or cuda-gdb on this host: no native frames"})
        return [], None
    outcome = _attempt(ctx, replay, _Target(ctx.path, release), env=ctx.env, prefix=prefix)
    so = _so_facts(ctx, layout.model_dir(release))
    m = ctx.manifest
    no_weights = m is not None and m.inductor_configs.get("aot_inductor.package_constants_in_so") == "False" and ctx.weights is None
    findings, evidence = native_findings(
        outcome.stdout,
        stage=replay.stage,
        so=so,
        process_libstdcxx=ctx.host.get("libstdcxx"),
        built_with=m.toolchain.cxx_version if m else ctx.built_with,
        unloaded_constants=len(m.package_constants()) if (m is not None and no_weights) else 0,
    )
    _record(ctx, "native", started, outcome, {"debugger": os.path.basename(prefix[0]), **evidence})
    return findings, evidence.get("cause")


def _libstdcxx_candidates(ctx: LadderContext) -> list[str]:
    seen: list[str] = []
    first = ctx.host.get("libstdcxx")
    if isinstance(first, str):
        seen.append(os.path.realpath(first))
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    for line in out.splitlines():
        if "libstdc++.so.6 (" in line and "=>" in line:
            path = os.path.realpath(line.split("=>", 1)[1].strip())
            if path not in seen:
                seen.append(path)
    return [p for p in seen if os.path.exists(p)]


def _remedy_step(ctx: LadderContext, replay: Replay, release: str, cause: str | None) -> list[Finding]:
    started = _begin(ctx, "step 5 remedy")
    so = _so_facts(ctx, layout.model_dir(release))
    static_runtime = bool(so) and not so.get("links_libstdcxx")
    if cause != "cxx_runtime" and not (cause is None and static_runtime):
        _record(ctx, "remedy", started, None, {"reason": f"no safe remedy to try for cause {cause or 'unknown'}"})
        return []
    tried = []
    for candidate in _libstdcxx_candidates(ctx)[:4]:
        env = {**ctx.env, "LD_PRELOAD": candidate}
        outcome = _attempt(ctx, replay, _Target(ctx.path, release), env=env)
        tried.append({"LD_PRELOAD": candidate, "outcome": outcome.describe()})
        if outcome.ok:
            what = "loads" + (" and runs the failing sample" if replay.stage == "run" else "")
            _record(ctx, "remedy", started, outcome, {"tried": tried, "verified": {"LD_PRELOAD": candidate}})
            return [
                info(
                    "env.cxx_runtime_mismatch",
                    PHASE,
                    f"verified remedy: with LD_PRELOAD={candidate} the package {what} in a fresh process",
                    hint=f"start the serving process with LD_PRELOAD={candidate} (or rebuild the package with the compiler whose libstdc++ the process uses), then rerun the probe with that variable set to confirm every check",
                    evidence={
                        "remedy": {
                            "env": {"LD_PRELOAD": candidate},
                            "verified": True,
                            "command": f"LD_PRELOAD={candidate} python -m runtime_probe {ctx.shown_path or ctx.path}",
                        }
                    },
                )
            ]
    _record(ctx, "remedy", started, None, {"tried": tried, "verified": None})
    return (
        [
            warning(
                "env.cxx_runtime_mismatch",
                PHASE,
                "no preloaded C++ runtime made the package load",
                hint="rebuild the package with the compiler of the serving environment",
                evidence={"tried": tried},
            )
        ]
        if tried
        else []
    )
