"""The one place aoti-guard takes torch's private AOTInductor API from (torch 2.11 to 2.15).

Every ``torch._C._aoti``, ``torch._inductor.*``, ``torch.export.pt2_archive._package``,
``torch._dynamo`` or ``torch._guards`` name either package uses is resolved here, and only here:
a torch release that moves one breaks this module's entries (``ENTRIES``, each asserted by
tests/unit/test_torch_compat.py on every torch CI runs), not a call site deep in a pipeline. An
entry that does not resolve raises ``TorchCompatError``, which names the torch version and the
missing API.

What a newer torch adds is detected by what it exposes (``FEATURES``: a signature, a method, a
header the wheel ships), never by its version string; ``so_features`` reads the same for a
package's model .so, whose runtime half (the container, ``load_constants``, the ``[AOTI_LOAD]``
log) is compiled from the BUILD's torch headers, not the host's. docs/compat.md has the table.

Standard library only at import time (runtime_probe's rule): torch is imported inside functions.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENTRIES",
    "FEATURES",
    "Entry",
    "Feature",
    "TorchCompatError",
    "aot_compile",
    "aoti_compile_and_package",
    "aoti_load_lines",
    "aoti_load_package",
    "compiled_model_class",
    "container_runner",
    "cpp_compiler",
    "detect_fake_mode",
    "dynamo_repro_aoti",
    "dynamo_reset",
    "export_guard_texts",
    "features",
    "has_inductor_config",
    "inductor_config",
    "load_package",
    "make_package_loader",
    "package_aoti",
    "package_loader_class",
    "resolve_all",
    "so_features",
    "sympy_functions",
    "torch_version",
    "triton_kernel_side_table",
]

# the strings a model .so carries when it was compiled with a torch that has the feature
# (the symbols are extern "C" exports of interface.cpp, the log prefix is model_base.h's macro)
_SO_MARKERS = {
    "load_log": b"[AOTI_LOAD]",  # 2.14+: AOTI_LOG_LOADING=1 prints the constant loads to stderr
    "did_call_load_constants": b"AOTInductorModelContainerDidCallLoadConstants",  # 2.14+
    "constants_from_cpu": b"AOTInductorModelContainerUpdateConstantBufferFromCpu",  # 2.13+: allow_h2d_copy
}


class TorchCompatError(RuntimeError):
    """A private torch API aoti-guard needs is missing or changed in the installed torch."""

    def __init__(self, api: str, version: str, reason: str) -> None:
        self.api = api
        self.version = version
        self.hint = "aoti-guard supports torch 2.11 to 2.15 (docs/compat.md); install one of those, or report this torch's change"
        super().__init__(f"torch {version} has no usable {api}: {reason} (expected in torch 2.11-2.15). hint: {self.hint}")


def torch_version() -> str:
    """The installed torch's version ("not importable: ..." when it cannot be imported)."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure means no torch to name
        return f"not importable: {type(exc).__name__}"
    return str(torch.__version__)


def _resolve(module: str, *attrs: str) -> Any:
    """``module.attr1.attr2...``, or TorchCompatError naming the torch version and the API."""
    api = ".".join((module, *attrs))
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise TorchCompatError(api, torch_version(), f"module {module} cannot be imported ({exc})") from None
    for i, name in enumerate(attrs):
        if not hasattr(obj, name):
            owner = ".".join((module, *attrs[:i]))
            raise TorchCompatError(api, torch_version(), f"{owner} has no attribute {name!r}")
        obj = getattr(obj, name)
    return obj


# --- the entries: each returns what it resolves to, or raises TorchCompatError -----------------


def package_loader_class() -> Any:
    """``torch._C._aoti.AOTIModelPackageLoader``: the C++ package loader. Its constructor is
    (path, model_name, run_single_threaded, num_runners, device_index) on 2.11-2.14, plus
    use_stream_affinity on 2.15 (defaulted, so the five positional arguments serve all)."""
    return _resolve("torch._C._aoti", "AOTIModelPackageLoader")


def compiled_model_class() -> Any:
    """``torch.export.pt2_archive._package.AOTICompiledModel``: the Python wrapper around a
    loader (2.11-2.15; its ``load_constants`` takes user_managed and allow_h2d_copy from 2.13)."""
    return _resolve("torch.export.pt2_archive._package", "AOTICompiledModel")


def reorder_kwargs() -> Any:
    """``torch.export._tree_utils.reorder_kwargs``: keyword arguments in the order of an input
    spec, as torch's ``AOTICompiledModel.__call__`` flattens them (2.11-2.15)."""
    return _resolve("torch.export._tree_utils", "reorder_kwargs")


def load_package() -> Any:
    """``torch._inductor.package.load_package``: torch's own loader, the fallback when the C++
    loader's constructor refuses our arguments (2.11-2.15)."""
    return _resolve("torch._inductor.package", "load_package")


def package_aoti() -> Any:
    """``torch._inductor.package.package_aoti``: writes the release model's package (2.11-2.15)."""
    return _resolve("torch._inductor.package", "package_aoti")


def aot_compile() -> Any:
    """``torch._inductor.aot_compile``: the release and twin compiles (with aot_inductor.package)."""
    return _resolve("torch._inductor", "aot_compile")


def aoti_compile_and_package() -> Any:
    """``torch._inductor.aoti_compile_and_package``: the plain-torch repro and the minifier dump."""
    return _resolve("torch._inductor", "aoti_compile_and_package")


def aoti_load_package() -> Any:
    """``torch._inductor.aoti_load_package``: the plain-torch repro's loader."""
    return _resolve("torch._inductor", "aoti_load_package")


def inductor_config() -> Any:
    """``torch._inductor.config``: the module whose (dotted) keys --inductor-config sets."""
    return _resolve("torch._inductor", "config")


def has_inductor_config(key: str) -> bool:
    """This torch's Inductor has the dotted config ``key`` (``aot_inductor.check_lowerbound``,
    ``aot_inductor.emit_multi_arch_kernel``: both 2.11-2.15)."""
    obj: Any = inductor_config()
    for part in key.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def triton_kernel_side_table() -> Any:
    """``torch._higher_order_ops.triton_kernel_wrap.kernel_side_table``: the user Triton kernels a
    traced ``triton_kernel_wrapper_*`` node refers to by ``kernel_idx`` (2.11-2.15)."""
    return _resolve("torch._higher_order_ops.triton_kernel_wrap", "kernel_side_table")


def cpp_compiler() -> str:
    """``torch._inductor.cpp_builder.get_cpp_compiler()``: the C++ compiler Inductor runs."""
    return str(_resolve("torch._inductor.cpp_builder", "get_cpp_compiler")())


def dynamo_repro_aoti() -> Any:
    """``torch._dynamo.repro.aoti``: the AOTI minifier's launcher module (its ``run_repro``'s
    flags move between releases: the minifier reads them from its source)."""
    return _resolve("torch._dynamo.repro.aoti")


def dynamo_reset() -> Any:
    """``torch._dynamo.reset``: forget compiled frames between the stage bisection's stages."""
    return _resolve("torch._dynamo", "reset")


def detect_fake_mode() -> Any:
    """``torch._guards.detect_fake_mode``: whether an ExportedProgram's example inputs are fake."""
    return _resolve("torch._guards", "detect_fake_mode")


def sympy_functions() -> Any:
    """``torch.utils._sympy.functions``: the sympy functions torch writes in shape expressions
    (``FloorDiv``, ``Mod``, ``CeilToInt``...), which its deserializer gives ``sympify`` by name."""
    return _resolve("torch.utils._sympy.functions")


def export_guard_texts(ep: Any) -> list[str] | None:
    """The shape guards torch.export kept as code: ``ExportedProgram._guards_code`` (2.11-2.15),
    else ``exported_program._convert_guards_to_code(gm)``; None when neither exists."""
    codes = getattr(ep, "_guards_code", None)
    if codes is None:
        try:
            convert = _resolve("torch.export.exported_program", "_convert_guards_to_code")
            codes = convert(ep.graph_module)
        except (TorchCompatError, AttributeError, TypeError):
            return None
    return [str(c) for c in codes]


def container_runner(so_path: str, device_type: str, device_index: int | None) -> Any:
    """A ``torch._C._aoti.AOTIModelContainerRunnerCpu`` / ``...Cuda`` over a bare model .so (its
    own constants loaded): (so_path, num_models) on CPU, plus (device, cubin_dir) on CUDA. The
    CUDA runner exists only in a CUDA build of torch."""
    if device_type == "cpu":
        return _resolve("torch._C._aoti", "AOTIModelContainerRunnerCpu")(so_path, 1)
    if device_type == "cuda":
        device = f"cuda:{0 if device_index is None or device_index < 0 else device_index}"
        return _resolve("torch._C._aoti", "AOTIModelContainerRunnerCuda")(so_path, 1, device, os.path.dirname(so_path))
    raise TorchCompatError(f"container runner for {device_type!r}", torch_version(), "only cpu and cuda have one")


def make_package_loader(path: str, model_name: str, device_index: int | None) -> Any:
    """A ``CompiledModel`` (what torch's ``AOTICompiledModel`` does) for ``model_name`` in the
    package (or extracted package folder, where ``features()["loader_accepts_directory"]``) at ``path``.

    Constructed directly: torch's load_package retries a failed load and logs a misleading
    "Loading outdated pt2 file", and load_pt2 would load every model in the archive.
    """
    from runtime_probe.runtime.compiled_model import CompiledModel

    loader_class = package_loader_class()
    index = -1 if device_index is None else int(device_index)
    try:
        loader = loader_class(path, model_name, False, 1, index)
    except TypeError:  # a constructor that refuses these arguments: torch's own Python loader
        return load_package()(path, model_name)
    # not torch's AOTICompiledModel: its module imports Inductor (~1 CPU-s in every loading process)
    return CompiledModel(loader, reorder_kwargs())


@dataclass(frozen=True)
class Entry:
    """One private API: ``api`` (dotted), ``versions`` (what it is per torch release), and the
    function that resolves it (raising TorchCompatError)."""

    api: str
    versions: str
    resolve: Callable[[], Any]


def _runner_cpu() -> Any:
    return _resolve("torch._C._aoti", "AOTIModelContainerRunnerCpu")


def _guards_entry() -> Any:
    # _guards_code is an instance attribute set in ExportedProgram.__init__: the class must set it
    import inspect

    cls = _resolve("torch.export.exported_program", "ExportedProgram")
    if "_guards_code" not in inspect.getsource(cls.__init__):
        raise TorchCompatError("ExportedProgram._guards_code", torch_version(), "ExportedProgram.__init__ no longer sets it")
    return cls


def _config_entry(key: str) -> Callable[[], Any]:
    def resolve() -> Any:
        if not has_inductor_config(key):
            raise TorchCompatError(f"torch._inductor.config.{key}", torch_version(), "no such Inductor config key")
        return key

    return resolve


_ALL = "2.11-2.15"
ENTRIES: tuple[Entry, ...] = (
    Entry(
        "torch._C._aoti.AOTIModelPackageLoader",
        "(path, name, single_threaded, runners, device) 2.11-2.14; + use_stream_affinity 2.15",
        package_loader_class,
    ),
    Entry("torch._C._aoti.AOTIModelContainerRunnerCpu", f"(so_path, num_models) {_ALL}; did_call_load_constants() 2.14+", _runner_cpu),
    Entry(
        "torch.export.pt2_archive._package.AOTICompiledModel",
        f"wraps a loader {_ALL}; load_constants(allow_h2d_copy) 2.13+; mirrored by runtime_probe.runtime.compiled_model, not imported to load",
        compiled_model_class,
    ),
    Entry("torch.export._tree_utils.reorder_kwargs", _ALL, reorder_kwargs),
    Entry("torch._inductor.package.load_package", f"{_ALL}; + use_stream_affinity 2.15", load_package),
    Entry("torch._inductor.package.package_aoti", _ALL, package_aoti),
    Entry("torch._inductor.aot_compile", _ALL, aot_compile),
    Entry("torch._inductor.aoti_compile_and_package", _ALL, aoti_compile_and_package),
    Entry("torch._inductor.aoti_load_package", _ALL, aoti_load_package),
    Entry("torch._inductor.config", _ALL, inductor_config),
    Entry("torch._inductor.cpp_builder.get_cpp_compiler", _ALL, lambda: _resolve("torch._inductor.cpp_builder", "get_cpp_compiler")),
    Entry("torch._dynamo.repro.aoti", f"run_repro's flags vary {_ALL}", dynamo_repro_aoti),
    Entry("torch._dynamo.reset", _ALL, dynamo_reset),
    Entry("torch._higher_order_ops.triton_kernel_wrap.kernel_side_table", _ALL, triton_kernel_side_table),
    Entry("torch._guards.detect_fake_mode", _ALL, detect_fake_mode),
    Entry("ExportedProgram._guards_code", _ALL, _guards_entry),
    Entry("torch.utils._sympy.functions", _ALL, sympy_functions),
    *(
        Entry(f"torch._inductor.config.{key}", _ALL, _config_entry(key))
        for key in (
            "aot_inductor.check_lowerbound",
            "aot_inductor.emit_multi_arch_kernel",
            "aot_inductor.package_constants_in_so",
            "aot_inductor.package_constants_on_disk_format",
            "aot_inductor.debug_intermediate_value_printer",
            "aot_inductor.dump_aoti_minifier",
            "aot_inductor.repro_level",
            "aot_inductor.metadata",
            "nan_asserts",
        )
    ),
)


def resolve_all() -> dict[str, str | None]:
    """Every entry on this torch: api -> None (resolves) or the TorchCompatError's message."""
    out: dict[str, str | None] = {}
    for entry in ENTRIES:
        try:
            entry.resolve()
            out[entry.api] = None
        except TorchCompatError as exc:
            out[entry.api] = str(exc)
    return out


# --- features of newer torch, detected by what the installed torch exposes -------------------


def _doc(obj: Any) -> str:
    return str(getattr(obj, "__doc__", None) or "")


def _header(rel: str) -> str | None:
    """A header the torch wheel ships (torch/include/...), or None (a wheel without headers)."""
    origin = importlib.import_module("torch").__file__
    if origin is None:
        return None
    path = os.path.join(os.path.dirname(origin), "include", rel)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _loader_accepts_directory() -> bool:
    # 2.13's loader takes an already-extracted package folder (is_directory_: "a user-provided
    # unpacked package directory"); nothing in its Python binding says so, its header does
    text = _header("torch/csrc/inductor/aoti_package/model_package_loader.h")
    return text is not None and "is_directory_" in text


def _loader_stream_affinity() -> bool:
    return "use_stream_affinity" in _doc(package_loader_class().__init__)


def _load_constants_h2d() -> bool:
    return "allow_h2d_copy" in _doc(package_loader_class().load_constants)


def _runner_did_call_load_constants() -> bool:
    return hasattr(_runner_cpu(), "did_call_load_constants")


def _build_logs_loading() -> bool:
    # the macro is compiled into each model .so from these headers: a package built here logs
    text = _header("torch/csrc/inductor/aoti_runtime/model_base.h")
    return text is not None and "AOTI_LOG_LOADING" in text


@dataclass(frozen=True)
class Feature:
    """What a newer torch gives: ``name``, where it was first seen, what aoti-guard uses it for,
    and its detector (True/False on the installed torch)."""

    name: str
    since: str  # the first release seen with it (documentation: the detector decides)
    use: str
    detect: Callable[[], bool]


FEATURES: tuple[Feature, ...] = (
    Feature(
        "loader_accepts_directory",
        "2.13",
        "AOTIModelPackageLoader loads an already-extracted package folder (measured for our loaders: docs/compat.md)",
        _loader_accepts_directory,
    ),
    Feature(
        "load_constants_h2d",
        "2.13",
        "load_constants(..., user_managed, allow_h2d_copy): CPU tensors copied into a CUDA model's constants",
        _load_constants_h2d,
    ),
    Feature(
        "runner_did_call_load_constants",
        "2.14",
        "AOTIModelContainerRunner*.did_call_load_constants() (AOTInductorModelContainerDidCallLoadConstants)",
        _runner_did_call_load_constants,
    ),
    Feature(
        "build_logs_loading",
        "2.14",
        "a model .so built here prints [AOTI_LOAD] lines under AOTI_LOG_LOADING=1 (the probe's load evidence)",
        _build_logs_loading,
    ),
    Feature("loader_stream_affinity", "2.15", "AOTIModelPackageLoader(..., use_stream_affinity): not used", _loader_stream_affinity),
)


def features() -> dict[str, bool]:
    """Each of ``FEATURES`` on the installed torch (False where its detector cannot tell)."""
    out: dict[str, bool] = {}
    for feature in FEATURES:
        try:
            out[feature.name] = bool(feature.detect())
        except (TorchCompatError, ImportError, AttributeError):
            out[feature.name] = False
    return out


def so_features(chunks: Iterable[bytes]) -> dict[str, bool]:
    """What a model .so's runtime half supports, from the strings it carries (it was compiled from
    the build's torch headers), read from its bytes in ``chunks``: ``load_log`` (prints
    [AOTI_LOAD] lines under AOTI_LOG_LOADING=1), ``did_call_load_constants``,
    ``constants_from_cpu`` (load_constants' allow_h2d_copy)."""
    found = dict.fromkeys(_SO_MARKERS, False)
    overlap = max(len(m) for m in _SO_MARKERS.values()) - 1
    tail = b""
    for chunk in chunks:
        window = tail + chunk
        for name, marker in _SO_MARKERS.items():
            found[name] = found[name] or marker in window
        tail = window[-overlap:]
    return found


def aoti_load_lines(stderr: str) -> list[str]:
    """The ``[AOTI_LOAD]`` lines a model .so printed (built with 2.14+, run under
    AOTI_LOG_LOADING=1): "load_constants: starting H2D copy of N constants", "... completed in
    N ms", the CUDA staging pool's choices. A .so built without its weights prints none."""
    return [line.strip() for line in stderr.splitlines() if line.lstrip().startswith("[AOTI_LOAD]")]
