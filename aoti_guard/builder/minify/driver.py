"""``aoti-guard build --minify``: when AOTInductor fails to compile a model, or validation finds it
alone wrong, drive PyTorch's own AOTI minifier to a small repro to send upstream.

Two helper processes (see _proc.py), both within one time budget (``--minify-timeout``):
1. ``aoti_guard.builder.minify.dump`` compiles the saved program with ``aoti_compile_and_package`` and
   the minifier dump on; torch reproduces the failure (compile error, or compiled vs eager accuracy
   on the example inputs) and writes ``minifier_launcher.py``;
2. ``python minifier_launcher.py minify ...`` shrinks the graph, checkpointing each smaller failing
   graph and copying the latest to ``repro.py``.
Everything lands in ``OUT.minify/`` beside the output. A budget that runs out with a checkpoint
written still reports the smallest repro so far.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aoti_guard import _proc
from aoti_guard.builder.minify.dump import REPRODUCED
from aoti_guard.builder.resolve.saved_program import save_program
from runtime_probe.child.isolation import ISOLATION_FLAGS
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import Finding, info, warning
from runtime_probe.reporting.report import PhaseResult

__all__ = [
    "AUTO_MINIFY_S",
    "MINIFY_FLAGS",
    "MinifierLog",
    "bisected_to_compiler",
    "check_minify_dir",
    "minify_dir",
    "minify_reason",
    "parse_minifier_log",
    "run_minifier",
]

PHASE = "minify"
MARKER = ".aoti-guard-minify"
# Saving eager intermediates needs memory and time and only helps accuracy bugs deep in big graphs;
# the dump step has just shown the original graph fails, so the sanity rerun is skipped too.
MINIFY_FLAGS = ("--skip-saving-eager-intermediates", "--skip-sanity")
_NOT_FOR_REPRO = ("aot_inductor.metadata",)  # aoti-guard's own strings: noise in an upstream repro

_STARTED = re.compile(r"Started off with (\d+) nodes")
_CHECKPOINT = re.compile(r"Writing checkpoint with (\d+) nodes to (\S+\.py)")
_WROTE = re.compile(r"Wrote minimal repro out to (\S+)")


@dataclass(frozen=True)
class MinifierLog:
    """What the minifier's output says: graph sizes, the last checkpoint, whether it finished."""

    nodes_before: int | None
    nodes_after: int | None
    checkpoint: str | None
    finished: bool


def parse_minifier_log(text: str) -> MinifierLog:
    started = _STARTED.search(text)
    checkpoints = _CHECKPOINT.findall(text)
    last = checkpoints[-1] if checkpoints else None
    before = int(started.group(1)) if started else (int(checkpoints[0][0]) if checkpoints else None)
    return MinifierLog(before, int(last[0]) if last else None, last[1] if last else None, bool(_WROTE.search(text)))


def minify_dir(output: str) -> str:
    """Where ``--minify`` writes: ``OUT.minify/`` beside ``OUT.pt2``."""
    return os.path.splitext(os.path.abspath(output))[0] + ".minify"


def check_minify_dir(path: str) -> None:
    """Refuse to reuse a folder aoti-guard did not create (it is emptied before each run)."""
    if os.path.exists(path) and not (os.path.isdir(path) and (os.path.exists(os.path.join(path, MARKER)) or not os.listdir(path))):
        raise UsageError(
            f"--minify writes to {path}, which exists and was not made by aoti-guard", hint="move it away, or choose another -o"
        )


# The minifier's budget when the stage bisection starts it without --minify (--minify-timeout
# gives the whole budget when asked for).
AUTO_MINIFY_S = 120.0


def bisected_to_compiler(phases: Sequence[PhaseResult]) -> bool:
    """The stage bisection found Inductor or the package departing first (build.first_divergence),
    with no remedy verified for it (a verified one, validate/precision.py, has named the cause:
    nothing is left for the minifier to find)."""
    return any(
        f.code == "build.first_divergence"
        and f.severity.value == "error"
        and f.evidence.get("first") in ("inductor", "package")
        and not (f.evidence.get("remedy") or {}).get("verified")
        for p in phases
        for f in p.findings
    )


def minify_reason(phases: Sequence[PhaseResult]) -> str | None:
    """Why the minifier should run, or None: compilation failed, or validation found AOTInductor
    alone wrong (the three-way verdict said so, or, without one, compiled differs from eager and
    is further from float64 than eager is) and no ONNX Runtime verdict blames the model instead,
    and the stage bisection, where it ran, found the first departing stage in the compiler
    (Inductor or the package), not in eager, export or the decompositions."""
    codes = {f.code for p in phases for f in p.findings}
    firsts = {f.evidence.get("first") for p in phases for f in p.findings if f.code == "build.first_divergence"}
    if firsts and not firsts & {"inductor", "package"}:
        return None  # the stage bisection put the cause before the compiler: nothing for its minifier
    if "build.compile_failed" in codes:
        return "AOTInductor could not compile the model"
    if "build.compiler_suspect" in codes:
        return "AOTInductor alone disagrees with eager and ONNX Runtime"
    if "build.validation_failed" in codes and "build.reference_disagrees" not in codes:
        return "the compiled model differs from eager"
    return None


def _minify_flags() -> list[str]:
    """The flags of MINIFY_FLAGS that this torch's launcher accepts (they move between releases;
    the launcher's CLI is run_repro's argparse, so its source says)."""
    import inspect

    from runtime_probe.runtime.torch_compat import TorchCompatError, dynamo_repro_aoti

    try:
        source = inspect.getsource(dynamo_repro_aoti().run_repro)
    except (TorchCompatError, OSError, TypeError, AttributeError):
        return []
    return [flag for flag in MINIFY_FLAGS if flag in source]


def _prepare(path: str) -> None:
    check_minify_dir(path)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    with open(os.path.join(path, MARKER), "w", encoding="utf-8") as fh:
        fh.write("made by aoti-guard build --minify; emptied by the next run\n")


def _launcher(out_dir: str) -> str | None:
    found = glob.glob(os.path.join(out_dir, "torch_compile_debug", "run_*", "minifier", "minifier_launcher.py"))
    return max(found, key=os.path.getmtime) if found else None


def _tail(text: str, n: int = 25) -> list[str]:
    keep = [line for line in text.splitlines() if line.strip() and "FutureWarning" not in line and "cls.__new__" not in line]
    return keep[-n:]


def _failed(message: str, hint: str, evidence: Mapping[str, Any]) -> Finding:
    return warning("build.minifier_failed", PHASE, message, hint=hint, evidence=dict(evidence))


def run_minifier(
    ep: Any, configs: Mapping[str, Any], work: str, out_dir: str, timeout: float, note: Callable[[str], None]
) -> tuple[list[Finding], dict[str, Any]]:
    """Reproduce the failure with the minifier dump on, then minify it. Returns (findings, detail).

    Never raises for a minifier that fails: that is a ``build.minifier_failed`` warning.
    """
    _prepare(out_dir)
    detail: dict[str, Any] = {"dir": out_dir}
    program, why = save_program(ep, work)
    if program is None:
        return [_failed(f"the minifier needs the saved program: {why}", "the minifier cannot run on this program", detail)], detail
    repro_configs = {k: v for k, v in configs.items() if k not in _NOT_FOR_REPRO}
    try:
        configs_text = json.dumps(repro_configs)
    except (TypeError, ValueError) as exc:
        return [_failed(f"the Inductor configs cannot be handed to the minifier: {exc}", "pass JSON-able config values", detail)], detail
    configs_path = os.path.join(work, "minify-configs.json")
    with open(configs_path, "w", encoding="utf-8") as fh:
        fh.write(configs_text)
    env = {"DUMP_AOTI_MINIFIER": "1", "AOTINDUCTOR_REPRO_LEVEL": "4", "TORCH_COMPILE_DEBUG_DIR": out_dir}

    note("reproducing the failure with aoti_compile_and_package and the minifier dump on (DUMP_AOTI_MINIFIER=1, repro level 4)")
    dump = _proc.start(
        _proc.python_argv("aoti_guard.builder.minify.dump", program, configs_path, os.path.join(work, "minify-dump.pt2")),
        log_path=os.path.join(out_dir, "dump.log"),
        cwd=out_dir,
        env=env,
    ).wait(timeout)
    detail.update(dump_seconds=round(dump.seconds, 2), dump_log=dump.log_path)
    launcher = _launcher(out_dir)
    if launcher is None:
        msg, hint = _no_launcher(dump)
        return [_failed(msg, hint, {**detail, "log_tail": _tail(dump.output)})], detail
    detail["launcher"] = launcher
    remaining = max(1.0, timeout - dump.seconds)
    note(f"minifying with {os.path.relpath(launcher, out_dir)} (at most {remaining:.0f}s)")
    return _minify(launcher, out_dir, env, remaining, detail), detail


def _no_launcher(dump: Any) -> tuple[str, str]:
    """Why the dump run left no minifier launcher, and what to do (message, hint)."""
    if dump.timed_out:
        return f"reproducing the failure {dump.how}", "raise --minify-timeout"
    if REPRODUCED not in dump.output:
        return (
            "the failure did not reproduce under aoti_compile_and_package's own check (compile, load, run, accuracy vs eager on the example inputs)",
            "the mismatch may be on a generated sample only (see the validate phase), or depend on the validation child; no repro was made",
        )
    return (
        f"aoti_compile_and_package failed ({dump.how}) but torch wrote no minifier launcher",
        "see evidence.log_tail and the dump log",
    )


def _minify(launcher: str, out_dir: str, env: Mapping[str, str], remaining: float, detail: dict[str, Any]) -> list[Finding]:
    """Run torch's minifier launcher for at most ``remaining`` seconds; the repro it wrote (or why
    none), with the commands to rerun it, into ``detail``."""
    argv = [sys.executable, *ISOLATION_FLAGS, launcher, "minify", *_minify_flags()]  # -P: its folder never shadows a module
    run = _proc.start(argv, log_path=os.path.join(out_dir, "minifier.log"), cwd=out_dir, env=dict(env)).wait(remaining)
    log = parse_minifier_log(_read(run.log_path))
    repro = os.path.join(out_dir, "repro.py")
    rerun = f"cd {shlex.quote(out_dir)} && {shlex.join(argv)}"
    detail.update(
        minifier_seconds=round(run.seconds, 2),
        minifier_log=run.log_path,
        nodes_before=log.nodes_before,
        nodes_after=log.nodes_after,
        checkpoint=log.checkpoint,
        rerun_minifier=rerun,
        timed_out=run.timed_out,
    )
    if not os.path.exists(repro) or log.nodes_after is None:
        return [
            _failed(
                f"the AOTI minifier wrote no repro ({run.how})", f"rerun it by hand: {rerun}", {**detail, "log_tail": _tail(run.output)}
            )
        ]
    detail.update(repro=repro, run_repro=f"{shlex.quote(sys.executable)} {shlex.quote(repro)}")
    finished = log.finished and not run.timed_out
    what = "reduced" if finished else f"was stopped ({run.how}); so far it reduced"
    message = f"the AOTI minifier {what} the failing graph from {log.nodes_before} to {log.nodes_after} nodes: {repro}"
    hint = f"run the repro: {detail['run_repro']}; rerun the minifier: {rerun}"
    make = info if finished else warning
    return [make("build.minified", PHASE, message, found=f"{log.nodes_after} nodes", hint=hint, evidence=detail)]


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""
