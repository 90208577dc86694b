"""The debug twin: the release program compiled again with AOTI's value printer
(``compile.TWIN_CONFIGS``), where it costs the build least.

``schedule(requested)`` says where (``--twin-schedule`` overrides ``auto``); ``auto`` is
``"concurrent"`` on every device: in a child process started before the release compile.

- CPU: the twin is a second whole g++ compile of the model, 0.59 of the bare path's time (median
  over the zoo's CPU run, docs/zoo.md), and nothing needs it before validation: it overlaps the
  release compile.
- CUDA: ``"after"`` (in this process, after the release model) reuses the Triton kernels the
  release compile has just built, and was the default until measured: on the H100, three zoo
  models at a time at full size (docs/zoo.md, "The twin's schedule on the GPU"), the child beside
  the release compile gave build / bare 1.28 against 1.40 after it (resnet18 1.28 / 1.30, bert
  1.39 / 1.51, timm_deit_tiny 1.26 / 1.40): the twin's wait fell from 11-23 s to 7-9 s, and the
  release compile beside the child took 0-4 s longer. ``--twin-schedule after`` keeps the old order (one Triton
  compile of the kernels instead of two, for a host short of CPU).

The child gets the program through ``torch.export.save``, with a flat call structure
(``flat_program``): its inputs are the leaves of ``(args, kwargs)`` and its outputs a tuple of
leaves. A library type in the call structure (a Hugging Face ``ModelOutput``, a ``DynamicCache``
that the user's factory registered) then needs nothing registered in the child. The compiled
kernels are the same; only the package's own call wrapper is flat. Everything that runs the twin
gives it the flat leaves (``boxed_run``), and the guarded loader takes the twin's call structure
from the manifest, which records the release model's.

The child runs at niceness 19 (``child_niceness``) so that on a busy host the release compile,
which the build waits on first, gets the cores first. What was measured is the build's time
(the H100: docs/zoo.md, "The twin's child below the release compile"); whether the twin's
kernels then came from the shared caches was not measured.

The child loads its own copy of the weights from the saved program: on CPU a build's peak memory
is about one model more than before (``--twin-schedule after`` keeps the old order).

When the child cannot be used (a program torch cannot save, configs that cannot be pickled, a
child that cannot load or compile the saved copy), the twin is compiled here after the release
model, and the build says why.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aoti_guard import _proc
from aoti_guard.builder.resolve.saved_program import save_program
from runtime_probe.runtime import user_modules

__all__ = ["SCHEDULES", "WEIGHTS", "TwinChild", "TwinResult", "flat_program", "schedule", "start_child", "weights"]

CHILD_MODULE = "aoti_guard.builder.twin.child"


SCHEDULES = ("auto", "concurrent", "after")


WEIGHTS = ("auto", "shared", "own")


def weights(requested: str, device: str) -> str:
    """Where the twin's weights are: ``"release"`` (none of its own: the release model's are
    loaded into it at run time, and the package stores them once) or ``"own"`` (a second copy in
    the twin's .so). ``requested`` is ``--twin-weights``; ``auto`` shares them on every device
    (``device`` is kept for a device where sharing must not be the default).

    On CPU, loading the release .so's constants into the twin is tested on every build; on CUDA
    the same path (``AOTIModelContainerRunnerCuda``) is checked by tests/gpu/test_gpu_twin_weights.py.
    """
    if requested == "own":
        return "own"
    return "release"


def schedule(requested: str = "auto") -> str:
    """``"concurrent"`` (a child beside the release compile) or ``"after"`` (here, after it):
    ``requested`` (``--twin-schedule``) unless it is ``"auto"``, which is concurrent."""
    if requested != "auto":
        return requested
    return "concurrent"  # on CPU and on CUDA alike: measured (the module's docstring)


def flat_program(ep: Any) -> Any:
    """A shallow copy of ``ep`` whose call structure is flat: positional leaves in, a tuple out.

    The graph, its weights and its symbol ranges are ``ep``'s own (shared, not copied); only the
    root entry of the module call graph and the example inputs differ. Raises ValueError where this
    torch's ExportedProgram is not laid out as expected (the caller then compiles in-process).
    """
    from torch.utils import _pytree as pytree

    entries = list(getattr(ep, "_module_call_graph", None) or [])
    if not entries or getattr(entries[0], "fqn", None) != "" or ep.example_inputs is None:
        raise ValueError("the program has no root call entry or no example inputs")
    root = entries[0]
    signature = root.signature
    leaves = pytree.tree_leaves(tuple(ep.example_inputs))
    changes: dict[str, Any] = {
        "in_spec": pytree.tree_structure((tuple(leaves), {})),
        "out_spec": pytree.tree_structure(tuple(range(signature.out_spec.num_leaves))),
    }
    if any(f.name == "forward_arg_names" for f in dataclasses.fields(signature)):
        changes["forward_arg_names"] = [f"leaf{i}" for i in range(len(leaves))]
    flat = copy.copy(ep)
    flat._module_call_graph = [dataclasses.replace(root, signature=dataclasses.replace(signature, **changes)), *entries[1:]]
    flat._example_inputs = None  # the setter checks the new value against the (new) in_spec
    flat.example_inputs = (tuple(leaves), {})
    return flat


@dataclass(frozen=True)
class TwinResult:
    """How the child ended: ``ok``; else ``stage`` ("load", "compile", "crash", "timeout") with ``lines`` (the error's first lines) and ``hint``."""

    ok: bool
    seconds: float
    stage: str | None = None
    lines: tuple[str, ...] = ()
    hint: str | None = None
    log_path: str | None = None

    @property
    def retry_here(self) -> bool:
        """A program the child could not load or compile: its copy went through
        ``torch.export.save``/``load`` and the in-memory program may compile (a genuine compiler
        error then fails here too, at the cost of a second compile). A crash or a timeout would
        only repeat."""
        return self.stage in ("load", "compile")


class TwinChild:
    """The twin compiling in a child; ``wait`` once for its ``TwinResult``, ``kill`` on the way out."""

    def __init__(self, running: _proc.Running, result_path: str, out_path: str) -> None:
        self.running = running
        self.result_path = result_path
        self.out_path = out_path

    def wait(self, timeout: float) -> TwinResult:
        ended = self.running.wait(timeout)
        if ended.timed_out:
            return TwinResult(False, ended.seconds, "timeout", (f"the twin's compile {ended.how}",), _TIMEOUT_HINT, ended.log_path)
        try:
            with open(self.result_path) as fh:
                told = json.load(fh)
        except (OSError, ValueError):
            last = [line for line in ended.output.splitlines() if line.strip()][-8:]
            return TwinResult(
                False, ended.seconds, "crash", (f"the twin's compiler process ended ({ended.how})", *last), _CRASH_HINT, ended.log_path
            )
        if told.get("ok") and os.path.isfile(self.out_path):
            return TwinResult(True, ended.seconds, log_path=ended.log_path)
        stage = str(told.get("stage") or "compile")
        return TwinResult(False, ended.seconds, stage, tuple(str(x) for x in told.get("lines") or ()), told.get("hint"), ended.log_path)

    def kill(self) -> None:
        self.running.kill()


_TIMEOUT_HINT = "raise --timeout, or build with --no-debug-twin; the release package is unaffected"
_CRASH_HINT = "the release package is unaffected; the last lines the twin's compiler process wrote are in this finding's evidence"


def start_child(
    ep: Any, configs: Mapping[str, Any], folder: str, out_path: str, model_name: str, imports: Sequence[str] = ()
) -> tuple[TwinChild | None, str | None]:
    """Save ``ep`` flat and start the child that compiles it with ``configs`` into ``out_path``;
    the child imports ``imports`` (the modules that register the program's user ops) before it
    loads the saved program.

    ``(child, None)``, or ``(None, why)`` where the child cannot be given the work.
    """
    os.makedirs(folder, exist_ok=True)
    try:  # checked before the program is written: a config holding a function or a lambda
        pickled_configs = pickle.dumps(dict(configs))
    except Exception as exc:  # noqa: BLE001 - whatever pickle raises for the object it met
        return None, f"the Inductor configs cannot be handed to a child ({type(exc).__name__}: {_first_line(exc)})"
    try:
        flat = flat_program(ep)
    except Exception as exc:  # noqa: BLE001 - another torch's ExportedProgram layout
        return None, f"the program has no flat form for a child ({type(exc).__name__}: {_first_line(exc)})"
    program, why = save_program(flat, folder)  # the save the minifier and ONNX Runtime use, in the twin's folder
    if program is None:
        return None, f"the program could not be saved for a child ({why})"
    request = os.path.join(folder, "twin-request.pkl")
    payload = pickle.dumps(
        {"program": program, "configs": pickled_configs, "out": out_path, "model_name": model_name, "nice": child_niceness()}
    )
    with open(request, "wb") as fh:
        fh.write(payload)
    result_path = os.path.join(folder, "twin-result.json")
    running = _proc.start(
        _proc.python_argv(CHILD_MODULE, request, result_path),
        log_path=os.path.join(folder, "twin-child.log"),
        env=user_modules.child_env(imports),
    )
    return TwinChild(running, result_path, out_path), None


# The twin child's niceness. 19: measured on the H100 (docs/zoo.md, "The twin's child below the
# release compile"): four full-size models at a time, the build 2-11% faster on each of four models
# (the intent: the release compile gets the cores first and the twin's longer wait falls under
# validation; the build's time was measured, not where each kernel came from); on this project's
# 2-core CPU host no difference (23.0-23.3 s both ways). AOTI_GUARD_TWIN_NICE overrides it (0: the
# build's own priority; measured by scripts/gpu_twin_nice_ab.sh, removed, last in commit 0cc60b5).
NICE_ENV = "AOTI_GUARD_TWIN_NICE"
DEFAULT_NICENESS = 19


def child_niceness() -> int:
    """The niceness the twin's child takes: ``NICE_ENV`` when it is a number 0..19, else ``DEFAULT_NICENESS``."""
    try:
        value = int(os.environ.get(NICE_ENV, str(DEFAULT_NICENESS)))
    except ValueError:
        return DEFAULT_NICENESS
    return value if 0 <= value <= 19 else DEFAULT_NICENESS


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:300] if text else ""
