"""Compiling with AOTInductor: the release model and its sanitized debug twin.

The release model is compiled exactly as ``aoti_compile_and_package`` would (same entry point,
``aot_compile`` on ``ep.module()``), plus the metadata aoti-guard mirrors into it. The twin is the
same program compiled again with AOTI's intermediate-value printer baked in.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Mapping
from typing import Any

from aoti_guard.builder import resources
from runtime_probe.runtime.torch_compat import aot_compile, has_inductor_config, inductor_config

__all__ = [
    "SHARED_WEIGHTS_CONFIG",
    "TWIN_CONFIGS",
    "CompileError",
    "compile_files",
    "describe_compile_error",
    "has_config",
    "release_configs",
    "twin_configs",
    "validate_config_keys",
]

# Baked into the twin. Printer level "2": every kernel's tensor arguments before and after its
# launch, and the graph inputs at entry (name, min/max/mean: NaN and Inf read apart, without
# stopping; runtime_probe/ladder/printer.py). No NaN asserts: torch's check stops at the first
# NaN *or* Inf, so a model that holds -inf by design (an additive attention mask) stopped at the
# mask on every call, and on CPU it checks the graph inputs only. Measured: docs/probe.md,
# "The debug twin's instrument".
TWIN_CONFIGS: dict[str, Any] = {"nan_asserts": False, "aot_inductor.debug_intermediate_value_printer": "2"}
# Options that would make the twin unusable on its own (weights outside its .so) are not inherited.
_NOT_FOR_TWIN = ("aot_inductor.package_constants_in_so", "aot_inductor.package_constants_on_disk_format")
# Set False for a twin that shares the release model's weights (``--twin-weights shared``).
SHARED_WEIGHTS_CONFIG = "aot_inductor.package_constants_in_so"
_MANAGED = ("aot_inductor.package", "aot_inductor.output_path")


class CompileError(Exception):
    def __init__(self, lines: list[str], hint: str) -> None:
        super().__init__(lines[0] if lines else "compile failed")
        self.lines = lines
        self.hint = hint


def has_config(key: str) -> bool:
    """This torch's Inductor has the (dotted) config ``key``."""
    return _has_config(key)


def _has_config(key: str) -> bool:
    return has_inductor_config(key)


def validate_config_keys(configs: Mapping[str, Any]) -> list[str]:
    """Keys Inductor does not know (typos), each with a close match where there is one."""
    import difflib

    known = list(inductor_config().get_config_copy().keys())
    bad = []
    for key in configs:
        if key in _MANAGED:
            bad.append(f"{key} (set by aoti-guard itself)")
        elif key not in known and not _has_config(key):
            close = difflib.get_close_matches(key, known, n=1)
            bad.append(f"{key}" + (f" (did you mean {close[0]}?)" if close else ""))
    return bad


def release_configs(user: Mapping[str, Any], metadata: Mapping[str, str], *, min_below_two: bool) -> dict[str, Any]:
    configs = dict(copy.deepcopy(dict(user)))
    meta = dict(configs.get("aot_inductor.metadata") or {})
    meta.update(metadata)
    configs["aot_inductor.metadata"] = meta
    # AOTI's own input checks assume dynamic dims >= 2 unless told otherwise; when the contract
    # allows 0 or 1, keep the native checks consistent with the contract the manifest records.
    if min_below_two and "aot_inductor.check_lowerbound" not in configs and _has_config("aot_inductor.check_lowerbound"):
        configs["aot_inductor.check_lowerbound"] = False
    return configs


def twin_configs(release: Mapping[str, Any], *, own_weights: bool = True) -> dict[str, Any]:
    """The release configs with the twin's instruments. ``own_weights=False``: no weights in the
    twin's .so; whatever loads it gives it the release model's (runtime_probe.package.release_constants)."""
    configs = {k: copy.deepcopy(v) for k, v in release.items() if k not in _NOT_FOR_TWIN}
    configs.update(TWIN_CONFIGS)
    if not own_weights:
        configs[SHARED_WEIGHTS_CONFIG] = False
    return configs


def compile_files(ep: Any, configs: Mapping[str, Any]) -> list[Any]:
    """AOT-compile ``ep`` (packaged form) and return the generated files. Raises CompileError."""

    options = dict(copy.deepcopy(dict(configs)))  # aot_compile mutates what it is given
    options["aot_inductor.package"] = True
    module_fn = ep.module
    gm = module_fn(check_guards=False) if "check_guards" in inspect.signature(module_fn).parameters else module_fn()
    args, kwargs = ep.example_inputs
    try:
        files = aot_compile()(gm, tuple(args), dict(kwargs), options=options)
    except Exception as exc:
        raise CompileError(*describe_compile_error(exc)) from exc
    if not isinstance(files, list):
        raise CompileError(
            [f"aot_compile returned {type(files).__name__}, not a file list"], "this torch version packages differently; report it"
        )
    return files


def describe_compile_error(exc: BaseException) -> tuple[list[str], str]:
    """The first useful lines of a compile failure, and what to do about it.

    A resource that ran out (builder/resources.py: a file-size limit, a full disk, memory) is said
    as such, its line kept in the lines; a C++ compiler's rejection is said as what is known (the
    compiler's own error), not as an Inductor bug, which nothing here establishes."""
    text = str(exc)
    lines = [f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".strip()]
    errors = [line.strip() for line in text.splitlines() if re.search(r"\berror\b", line, re.I)]
    lines += errors[:8]
    exhausted = resources.from_exception(exc)
    if exhausted is not None:
        if not any(exhausted.found in line for line in lines):
            lines.append(exhausted.found)
        return lines, f"{exhausted.what}: {exhausted.hint}"
    name = type(exc).__name__
    if name == "CppCompileError" or "CppCompileError" in text:
        hint = (
            "the C++ compiler rejected the code Inductor generated (its error is above): check that the compiler it names is "
            "installed and new enough (g++ >= 11); --minify reduces the failure to a small standalone repro"
        )
    elif "triton" in text.lower():
        hint = "a Triton kernel failed to compile: check the GPU, the CUDA toolkit and triton versions match torch's"
    else:
        hint = "rerun with TORCH_LOGS=+inductor (or --trace-dir DIR and tlparse) to see where Inductor failed"
    return lines, hint
