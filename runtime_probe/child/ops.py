"""What the child interpreter does on request (see main.py). Everything here may import torch.

Each op returns JSON-able data; an exception becomes a ``ChildRaised`` in the parent. A crash
(signal) kills the child, and the parent attributes it to the op it was waiting for.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.formats import treespec as _treespec
from runtime_probe.golden import cases as _golden_cases
from runtime_probe.golden import compact as _compact
from runtime_probe.package.extractions import own_extraction_roots
from runtime_probe.package.placement import leaf_device
from runtime_probe.runtime import numerics as _numerics
from runtime_probe.runtime import torch_compat
from runtime_probe.runtime.user_modules import IMPORT_FAILED


class State:
    def __init__(self) -> None:
        self.models: dict[str, Any] = {}
        self.tensor_files: dict[str, dict[str, Any]] = {}
        self.checkers: dict[tuple[str, str], Any] = {}  # (package, device) -> the guard's checks of its stored inputs


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def loaded_libstdcxx() -> str | None:
    """The libstdc++ this process actually mapped (after torch's import), from /proc/self/maps."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if "libstdc++.so" in os.path.basename(path):
                    return path
    except OSError:
        return None
    return None


def op_facts(state: State, device_type: str | None = None, device_index: int | None = None) -> dict[str, Any]:
    """Facts about this interpreter: torch, CUDA devices, driver, the C++ runtime it mapped."""
    facts: dict[str, Any] = {"python": platform.python_version(), "executable": os.path.realpath(sys.executable)}
    started = time.monotonic()
    try:
        import torch
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure means "no usable torch"
        # SystemExit too: a torch that calls sys.exit() while importing is no usable torch either,
        # and the child must live on to say so (the parent reports env.torch_missing)
        facts["torch_error"] = f"{type(exc).__name__}: {exc}"
        facts["torch_origin"] = _module_origin("torch")
        return facts
    facts["torch_import_seconds"] = round(time.monotonic() - started, 3)
    facts["torch"] = torch.__version__
    facts["torch_git"] = getattr(torch.version, "git_version", None)
    facts["cuda_runtime"] = torch.version.cuda
    facts["triton"] = _dist_version("triton") or _dist_version("pytorch-triton")
    facts["libstdcxx"] = loaded_libstdcxx()
    devices: list[dict[str, Any]] = []
    cuda_ok = False
    if device_type in (None, "cuda"):
        try:
            cuda_ok = bool(torch.cuda.is_available())
            count = torch.cuda.device_count() if cuda_ok else 0
        except Exception as exc:  # noqa: BLE001
            facts["cuda_error"] = f"{type(exc).__name__}: {exc}"
            count = 0
        for i in range(count):
            props = torch.cuda.get_device_properties(i)
            dev: dict[str, Any] = {
                "index": i,
                "name": props.name,
                "capability": f"{props.major}{props.minor}",
                "total_memory": int(props.total_memory),
            }
            if device_index is None or device_index == i:
                try:
                    free, _total = torch.cuda.mem_get_info(i)
                    dev["free_memory"] = int(free)
                except Exception as exc:  # noqa: BLE001
                    dev["memory_error"] = str(exc)
            devices.append(dev)
    facts["cuda_available"] = cuda_ok
    facts["devices"] = devices
    facts["driver"] = _driver_facts()
    return facts


def _module_origin(name: str) -> str | None:
    """Where ``name`` would be imported from (without importing it), for a failed import."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    return None if spec is None else spec.origin


def _driver_facts() -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
        parts = first.split()
        version = next((p for p in parts if p.count(".") >= 1 and p.replace(".", "").isdigit()), None)
        out["version"] = version
    except OSError:
        pass
    try:
        import ctypes

        libcuda = ctypes.CDLL("libcuda.so.1")
        value = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(value)) == 0:
            out["cuda_version"] = f"{value.value // 1000}.{(value.value % 1000) // 10}"
    except OSError:
        pass
    return out


@dataclass(frozen=True)
class LoadRequest:
    """A ``load`` request's optional arguments (``op_load`` says what each one does)."""

    model_name: str = "model"
    device_index: int | None = None
    constants_from: dict[str, str] | None = None
    num_runners: int = 1


def op_load(state: State, key: str, path: str, **args: Any) -> dict[str, Any]:
    """Load a package's model (``args``: the fields of ``LoadRequest``). ``constants_from``
    (``{"path", "model_name"}``): the model has no weights of its own (a debug twin built without
    them) and takes that package model's constants before anything can call it. ``num_runners``:
    calls that may run at once (``probe --threads`` loads a second model with more to verify its
    remedy)."""
    req = LoadRequest(**args)
    model_name, device_index, constants_from = req.model_name, req.device_index, req.constants_from
    started = time.monotonic()
    model = torch_compat.make_package_loader(path, model_name, device_index, req.num_runners)
    seconds = time.monotonic() - started
    metadata = dict(model.get_metadata())
    shared = None
    if constants_from is not None:
        from runtime_probe.package.release_constants import share_release_constants

        device_type = metadata.get("AOTI_DEVICE_KEY", "cpu")
        shared = share_release_constants(model, constants_from["path"], constants_from["model_name"], device_type, device_index)
    state.models[key] = model
    try:
        fqns = list(model.get_constant_fqns())
    except Exception:  # noqa: BLE001 - older runtimes lack it
        fqns = None
    return {
        "seconds": round(seconds, 4),
        "constant_fqns": fqns,
        "metadata": metadata,
        "release_constants": shared,
        # where the loader extracted the package: the worker removes what a crash leaves there
        "extracted_to": own_extraction_roots(),
    }


def op_constant_digests(
    state: State, path: str, names: list[str], model_name: str = "model", device_type: str = "cpu", device_index: int | None = None
) -> dict[str, Any]:
    """The named constants' hashes, dtypes and shapes as the package's model holds them
    (``release_constant_digests``): the build pairs a constant the compiler renamed by its value."""
    from runtime_probe.package.release_constants import release_constant_digests

    started = time.monotonic()
    digests = release_constant_digests(path, model_name, names, device_type, device_index)
    return {"seconds": round(time.monotonic() - started, 4), "digests": digests}


def _tensors(state: State, path: str) -> dict[str, Any]:
    if path not in state.tensor_files:
        state.tensor_files[path] = _safetensors.load(path)
    return state.tensor_files[path]


@dataclass(frozen=True)
class WeightsRequest:
    """One ``load_weights`` request's arguments as the parent sends them (``op_load_weights``)."""

    weights_path: str
    device: str
    names: list[str]
    sources: dict[str, str] | None = None
    kept_from: dict[str, str] | None = None


def op_load_weights(state: State, key: str, **args: Any) -> dict[str, Any]:
    """Load already-validated weights into a model (the parent checked names, shapes, dtypes:
    ``runtime_probe.package.weights``; ``args``: the fields of ``WeightsRequest``). ``sources``:
    constant -> the file's tensor it takes (a tied constant takes its tied name's); the constants
    it leaves out keep the package's values. None: every tensor loaded is a constant of that name,
    and every constant is loaded. ``kept_from`` (``{"path", "entry"}``): a package without
    weights, whose entry holds the values of the constants no checkpoint holds (the parent
    checked the archive)."""
    req = WeightsRequest(**args)
    started = time.monotonic()
    # borrow: load_constants copies the tensors in at once, so the library's mmap-backed ones do
    tensors = _safetensors.load(req.weights_path, names=req.names, device=req.device, borrow=True)
    constants = tensors if req.sources is None else {name: tensors[src] for name, src in req.sources.items()}
    if req.kept_from is not None:
        constants = {**_kept_constants(req.kept_from["path"], req.kept_from["entry"], req.device), **constants}
    state.models[key].load_constants(constants, check_full_update=req.sources is None)
    return {"seconds": round(time.monotonic() - started, 4), "loaded": sorted(constants)}


def _kept_constants(path: str, entry: str, device: str) -> dict[str, Any]:
    from runtime_probe.package.archive import open_archive

    archive, findings = open_archive(path)
    if archive is None:
        raise RuntimeError(f"the package cannot be read: {findings[0].message if findings else path}")
    with archive:
        return _safetensors.load(archive.read(entry, max_bytes=archive.entries[entry].size), device=device)


@dataclass(frozen=True)
class RunRequest:
    """One ``run`` request's arguments as the parent sends them (JSON values; ``op_run`` says
    what each one does)."""

    golden_path: str
    sample: dict[str, Any]
    inputs: list[dict[str, Any]]
    in_spec: str
    outputs: list[str]
    device: str
    tolerances: dict[str, list[float]] | None = None
    save_path: str | None = None
    save_durable: bool = True
    equal_nan: bool = False
    input_device: str | None = None
    contract_from: str | None = None
    stored: bool = False
    iterations: int = 1
    save_inputs_path: str | None = None
    warmup: int = 0
    duration_s: float | None = None
    resize: dict[str, list[int]] | None = None
    raw_times: bool = False

    @property
    def gpu(self) -> str | None:
        """The CUDA device the comparison's arithmetic runs on (beside the output, a chunk at a
        time), or None on the CPU."""
        return self.device if self.device.startswith("cuda") else None


def op_run(state: State, key: str, **args: Any) -> dict[str, Any]:
    """Run one sample through a loaded model and compare with the references it stores
    (``args``: the fields of ``RunRequest``, by name).

    Each input goes where the package takes it (``inputs[i]["device"]``: package/placement.py),
    or every one to ``input_device`` (to replay a serving bug);
    ``contract_from`` (the package path) checks them against its contract first, by name;
    ``stored``: the inputs are the package's own golden samples, checked by leaf name with the
    value ranges (``_stored_contract_error``). A refusal is ``contract_error`` in the reply, and
    data the file's reader refuses (BOOL bytes other than 0/1, not a safetensors file, a missing
    tensor) is ``data_error``: neither runs the model, and neither is a failure of it.
    ``iterations`` > 1 or ``duration_s``: after the judged run and ``warmup`` untimed calls, time
    at least ``iterations`` calls and at least ``duration_s`` seconds (``latency_ms``: reporting/latency.py).
    ``save_path`` / ``save_inputs_path``: write the outputs / inputs as safetensors, keyed by name
    (an inputs file is what ``--inputs`` takes back); ``save_durable=False``: the outputs file is
    read back and removed at once (the build's validation), so it is not fsynced.
    ``resize``: input name -> sizes (``probe --shapes``): inputs made at those sizes as the build
    makes its golden samples (``_resized``; a fixed seed). ``raw_times``: the reply's
    ``times_s`` holds every timed call's seconds too (``probe --latency-raw``).
    """
    req = RunRequest(**args)
    try:
        tensors, leaves, spec = _prepared(state, req)
    except _Refused as cannot:
        return cannot.reply
    model = state.models[key]
    report = _judged_run(req, model, leaves, spec, tensors)
    if "compact_error" not in report and (req.iterations > 1 or req.duration_s):
        report["latency_ms"] = _latency(
            lambda: _run_flat(model, leaves, spec), req.device, req.iterations, req.warmup, req.duration_s, req.raw_times
        )
        if req.raw_times:  # beside the summary, never in it: the report keeps the statistics alone
            report["times_s"] = report["latency_ms"].pop("times_s")
    return report


def _prepared(state: State, req: RunRequest) -> tuple[dict[str, Any], list[Any], Any]:
    """The sample's stored tensors, the call's flat leaves and the input spec, the leaves checked
    against the contract when asked. Raises ``_Refused`` (the whole reply) when the data cannot be
    read or made, or the contract refuses it: the model must not run."""
    try:
        tensors = _tensors(state, req.golden_path)
    except _safetensors.SafetensorsError as exc:
        raise _Refused({"data_error": str(exc)[:500]}) from None
    leaves = _leaves(req, _sample_values(req, tensors))
    spec = _treespec.load(req.in_spec)
    refused = _inputs_refused(state, req, leaves, spec)
    if refused is not None:
        raise _Refused({"contract_error": refused})
    return tensors, leaves, spec


def op_throughput(state: State, key: str, callers: list[int], seconds: float, warmup: int = 3, **args: Any) -> dict[str, Any]:
    """``probe --threads``: calls/s of the model loaded as ``key`` with each count of concurrent
    callers in ``callers`` (threads calling it for ``seconds`` each, child/concurrency.py), on one
    sample (``args``: the fields of ``RunRequest``). Each call ends with a device synchronize, as
    a serving thread that reads its answer does. The reply: ``counts`` (one entry per count),
    ``cores`` (the CPUs this process may run on), ``main_intra_op_threads``
    (``torch.get_num_threads()`` here) and ``load_average`` (the host's, 1 minute), or a refusal
    as ``op_run`` replies it."""
    import torch

    from runtime_probe.child.concurrency import measure

    req = RunRequest(**args)
    try:
        _, leaves, spec = _prepared(state, req)
    except _Refused as cannot:
        return cannot.reply
    model = state.models[key]

    def call() -> None:
        _run_flat(model, leaves, spec)
        if req.device.startswith("cuda"):
            torch.cuda.synchronize(req.device)

    for _ in range(warmup):
        call()
    counts = _best_of_rounds(lambda n, window: measure(call, n, window, torch.get_num_threads), [int(n) for n in callers], float(seconds))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None  # how busy the host was: read by the verdict
    return {"counts": counts, "cores": cores, "main_intra_op_threads": torch.get_num_threads(), "load_average": load}


THROUGHPUT_ROUNDS = 2


def _best_of_rounds(timed: Callable[[int, float], dict[str, Any]], callers: list[int], seconds: float) -> list[dict[str, Any]]:
    """Each count timed in ``THROUGHPUT_ROUNDS`` interleaved rounds of ``seconds / rounds`` (1, 2,
    4, 1, 2, 4): the window with the most calls/s stands for its count. Another process on the
    host only ever slows a window down, so the best of interleaved windows is the count's own
    rate; one window each let a busy minute under the baseline read as scaling (a one-runner
    package "scaled" 1.3x on a loaded 2-core CI host)."""
    window = seconds / THROUGHPUT_ROUNDS
    best: dict[int, dict[str, Any]] = {}
    for _ in range(THROUGHPUT_ROUNDS):
        for n in callers:
            got = timed(n, window)
            if n not in best or float(got.get("calls_per_s") or 0.0) > float(best[n].get("calls_per_s") or 0.0):
                best[n] = got
    return [best[n] for n in callers]


class _Refused(Exception):
    """A sample that cannot be made: ``reply`` is the op's whole reply (the model does not run)."""

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__(reply)
        self.reply = reply


def _sample_values(req: RunRequest, tensors: dict[str, Any]) -> dict[str, Any]:
    """Each tensor input's values by name: stored in the golden file, or made again from its
    recipe (a compact sample: runtime_probe/golden), then resized for ``--shapes``. Raises
    ``_Refused`` when the sample cannot be made."""
    made, refused = _golden_cases.regenerate(req.sample, tensors) if req.sample.get("recipes") else ({}, None)
    if refused is not None:
        raise _Refused(refused)
    try:
        values = {
            spec["name"]: made[spec["name"]] if spec["name"] in made else tensors[req.sample["inputs"][spec["name"]]]
            for spec in req.inputs
            if spec["kind"] == "tensor"
        }
    except KeyError as exc:  # the parent checks the records first (golden/records.py): a record it missed
        raise _Refused({"data_error": f"the sample's record names no stored tensor for {str(exc)[:200]}"}) from None
    if req.resize:
        values |= _resized(values, req.resize, req.contract_from)
    return values


def _leaves(req: RunRequest, values: dict[str, Any]) -> list[Any]:
    """The call's flat leaves in the contract's order, each tensor in its compiled layout on its
    device; written to ``save_inputs_path`` when asked."""
    leaves: list[Any] = []
    symbols = req.sample.get("symbols") or {}
    for spec in req.inputs:
        if spec["kind"] == "tensor":
            where = req.input_device or leaf_device(spec.get("device", req.device), req.device)
            leaves.append(_restride(values[spec["name"]], spec.get("stride"), symbols).to(where))
        else:
            leaves.append(spec.get("value"))
    if req.save_inputs_path is not None:
        named = {spec["name"]: leaf for spec, leaf in zip(req.inputs, leaves) if spec["kind"] == "tensor"}
        _safetensors.dump({k: v.detach().to("cpu").contiguous() for k, v in named.items()}, req.save_inputs_path)
    return leaves


def _inputs_refused(state: State, req: RunRequest, leaves: list[Any], spec: Any) -> dict[str, Any] | None:
    """The contract's verdict on the leaves when ``contract_from`` asks for one (None: they pass)."""
    if req.contract_from is None:
        return None
    if req.stored:
        return _stored_contract_error(state, req.contract_from, req.device, leaves)
    return _contract_error(req.contract_from, req.device, leaves, spec, req.in_spec)


def _judged_run(req: RunRequest, model: Any, leaves: list[Any], spec: Any, tensors: dict[str, Any]) -> dict[str, Any]:
    """The judged call: its time, each output compared with its reference, the outputs saved when
    asked; ``{"compact_error": ...}`` when a compact reference cannot be read."""
    import torch

    started = time.monotonic()
    flat = _run_flat(model, leaves, spec)
    if req.device.startswith("cuda"):
        torch.cuda.synchronize(req.device)
    seconds = time.monotonic() - started
    report: dict[str, Any] = {"seconds": round(seconds, 5), "count": len(flat), "outputs": {}}
    if len(flat) != len(req.outputs):
        report["count_mismatch"] = {"expected": len(req.outputs), "found": len(flat)}
    saved: dict[str, Any] = {}
    for name, value in zip(req.outputs, flat):
        if not isinstance(value, torch.Tensor):
            report["outputs"][name] = {"passed": True, "not_tensor": repr(value)[:200]}
            continue
        try:
            report["outputs"][name] = _judged_output(req, name, value, tensors)
        except (KeyError, ValueError) as exc:
            return {"compact_error": f"output {name!r}: {str(exc)[:300]}"}
        if req.save_path is not None:
            saved[name] = value.detach().to("cpu")
    if req.save_path is not None:
        _safetensors.dump(saved, req.save_path, durable=req.save_durable)
    return report


def _judged_output(req: RunRequest, name: str, value: Any, tensors: dict[str, Any]) -> dict[str, Any]:
    """One tensor output's entry: its facts, and its comparison with the sample's reference (a
    compact digest, or a stored tensor) when tolerances are given. Raises KeyError / ValueError
    when a compact reference cannot be read."""
    entry: dict[str, Any] = {
        "nonfinite": _numerics.nonfinite_count(value),
        "dtype": str(value.dtype).replace("torch.", ""),
        "shape": list(value.shape),
        "device": str(value.device),  # the parent judges it against the manifest (placement.output_devices)
    }
    if req.tolerances is None:
        return entry
    atol, rtol = req.tolerances.get(name, [0.0, 0.0])
    ref_key = req.sample.get("outputs", {}).get(name)
    digest = (req.sample.get("digests") or {}).get(name)
    if digest is not None:
        entry.update(_golden_cases.check_output(value, digest, tensors, _compact.Bound(atol, rtol, req.equal_nan), req.gpu))
    elif ref_key is not None and ref_key in tensors:
        entry.update(_numerics.stats(value, tensors[ref_key], atol=atol, rtol=rtol, equal_nan=req.equal_nan, device=req.gpu))
    return entry


def _run_flat(model: Any, leaves: list[Any], spec: Any) -> list[Any]:
    """Run on the flat tensor leaves and return the flat outputs, in the contract's order.

    torch's ``AOTICompiledModel.__call__`` rebuilds both call structures from the package's
    treespecs, which needs every library type in them registered (importing transformers for a
    ``ModelOutput``). The runner itself takes and returns flat tensor lists, so this path needs no
    library at all.
    """
    import torch
    from torch.utils import _pytree as pytree

    loader = getattr(model, "loader", None)
    if loader is not None and hasattr(loader, "boxed_run"):
        return list(loader.boxed_run([x for x in leaves if isinstance(x, torch.Tensor)]))
    if spec is None:  # an older torch's load_package model: only the structured call exists
        raise RuntimeError("this torch's loader has no flat call and the input structure cannot be rebuilt here")
    args, kwargs = pytree.tree_unflatten(leaves, spec)
    return list(pytree.tree_leaves(model(*args, **kwargs)))


def _contract_error(package: str, device: str, leaves: list[Any], spec: Any, in_spec: str) -> dict[str, Any] | None:
    """The guarded loader's verdict on these inputs, by name (None: they pass)."""
    from torch.utils import _pytree as pytree

    from runtime_probe.reporting.errors import InputContractError

    if spec is None:
        missing = ", ".join(_treespec.type_names(in_spec)) or "unknown types"
        return {
            "code": "input.structure",
            "argument": None,
            "message": f"the inputs' structure uses {missing}, which this process cannot import: the inputs were not checked by name",
            "expected": None,
            "found": None,
            "hint": "install the library that defines those types where the probe runs",
        }
    args, kwargs = pytree.tree_unflatten(leaves, spec)
    try:
        _checker(package, device).check(*args, **kwargs)
    except InputContractError as exc:
        return _refusal(exc)
    return None


def _refusal(exc: Any) -> dict[str, Any]:
    """An InputContractError as the reply's ``contract_error``."""
    return {
        "code": exc.code,
        "argument": exc.argument,
        "message": exc.message,
        "expected": exc.expected,
        "found": exc.found,
        "hint": exc.hint,
    }


def _stored_contract_error(state: State, package: str, device: str, leaves: list[Any]) -> dict[str, Any] | None:
    """The guarded loader's verdict on a golden sample's stored inputs (None: they pass), before
    the model runs: a package whose golden data breaks its own contract would pass here while
    ``runtime_probe.load()`` refuses every such call. Its input checks with the value ranges (an id
    outside its table is undefined behaviour in native code), each argument given by its leaf names,
    so no library type of the input structure is needed (the run itself takes the flat leaves)."""
    from runtime_probe.reporting.errors import InputContractError

    key = (package, device)
    if key not in state.checkers:
        state.checkers[key] = _checker(package, device, stored=True)
    checker = state.checkers[key]
    by_param: dict[str, Any] = {}
    for spec, leaf in zip(checker.manifest.io.inputs, leaves):
        if spec.name == spec.param:
            by_param[spec.param] = leaf
        else:
            by_param.setdefault(spec.param, {})[spec.name] = leaf
    try:
        checker.check(**{name: by_param[name] for name in checker.param_names if name in by_param})
    except InputContractError as exc:
        return _refusal(exc)
    return None


def _latency(
    call: Any, device: str, iterations: int, warmup: int = 0, duration_s: float | None = None, raw: bool = False
) -> dict[str, Any]:
    """Per-call wall time, as trtexec reports it: ``warmup`` untimed calls first (after the judged
    run), then calls until there are ``iterations`` of them and ``duration_s`` seconds have passed;
    each call ends with a device synchronize, so the time is the whole call's. ``raw``: the
    per-call seconds too, as ``times_s``."""
    import torch

    from runtime_probe.reporting.latency import summarize

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        call()
    sync()
    times: list[float] = []
    begun = time.perf_counter()
    until = begun + (duration_s or 0.0)
    while len(times) < iterations or time.perf_counter() < until:
        started = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - started) * 1000.0)
    out = summarize(times, time.perf_counter() - begun, warmup=warmup, threads=torch.get_num_threads())
    if raw:
        out["times_s"] = [t / 1000.0 for t in times]
    return out


def _checker(package: str, device: str, *, stored: bool = False) -> Any:
    """The guarded loader's input checks for ``package`` (one --inputs run per probe: not cached).
    ``stored``: for the golden samples, with value ranges and without the generated fast path
    (each sample is checked once; the diagnosing path alone costs far less to build)."""
    import torch

    from runtime_probe.guard.inputs import InputChecker

    manifest = _read_manifest(package)
    if manifest is None:
        raise RuntimeError(f"cannot reopen {package}")
    return InputChecker(manifest, torch.device(device), check_values=stored, no_fast_path=stored)


def _read_manifest(package: str) -> Any:
    """The manifest of ``package`` (the probe's private copy, whose manifest the parent checked),
    or None when it cannot be opened."""
    from runtime_probe.package.archive import open_archive
    from runtime_probe.package.manifest import MAX_MANIFEST_BYTES, parse_manifest
    from runtime_probe.runtime import layout

    archive, _ = open_archive(package)
    if archive is None:
        return None
    with archive:
        return parse_manifest(archive.read(layout.MANIFEST, max_bytes=MAX_MANIFEST_BYTES))


def _resized(values: Mapping[str, Any], resize: dict[str, list[int]], package: str | None) -> dict[str, Any]:
    """``probe --shapes``: each resized input made by the generator of the build's golden samples
    (runtime_probe/golden/recipe.py) from the example's values and the package's contract: a
    mask padded on the right, on the left and not at all, ids across their table with both ends,
    positions that follow the mask, other values drawn from the example's. An input no recipe
    fits (no contract to read, a kind the generator does not make, a request over its byte caps)
    keeps the example's values resampled, as before recipes existed. ``values``: the sample's
    tensor inputs by name (a compact sample's already made again from their recipes)."""
    import torch

    from runtime_probe.golden import recipe as _recipe

    examples = {name: value for name, value in values.items() if name in resize}
    made: dict[str, Any] = {}
    manifest = _read_manifest(package) if package else None
    specs = [s for s in manifest.io.inputs if s.tensor is not None and s.name in examples] if manifest is not None else []
    if specs:
        templates = _recipe.plan(specs, [examples[s.name] for s in specs])
        recipes, pools = [], {}
        for s in specs:
            t = templates.get(s.name)
            if t is None:
                continue
            shape = tuple(resize[s.name])
            stride = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
            recipes.append(
                _recipe.recipe(s.name, t, s.name, _recipe.Sized(s.tensor.dtype, shape, stride), _recipe.input_seed(0, "shapes", s.name))
            )
            if t.kind == "pool":
                pools[s.name] = t.pool
        try:
            made = _recipe.generate(recipes, pools)
        except (_recipe.RecipeError, RuntimeError, TypeError, AttributeError):  # RecipeError is a ValueError
            made = {}  # sizes over the generator's caps, a dtype this torch lacks: every input resampled below
    gen = torch.Generator().manual_seed(0)
    for name, example in examples.items():
        if name not in made:
            made[name] = _resample(example, resize[name], gen)
    return made


def _resample(example: Any, shape: list[int], gen: Any) -> Any:
    """A contiguous tensor of ``shape`` whose values are drawn from ``example``'s (``--shapes``
    for an input the recipes of the build's golden samples do not make)."""
    import torch

    flat = example.detach().reshape(-1)
    numel = 1
    for n in shape:
        numel *= n
    if flat.numel() == 0 or numel == 0:
        return torch.zeros(shape, dtype=example.dtype)
    return flat[torch.randint(flat.numel(), (numel,), generator=gen)].reshape(shape).clone()


def _restride(t: Any, stride: list[Any] | None, symbols: dict[str, int]) -> Any:
    """Give a golden tensor (stored contiguous) the layout the model was compiled for."""
    import torch

    if not stride or t.dim() != len(stride):
        return t
    try:
        want = [s if isinstance(s, int) else _symexpr.compile_expr(s)(symbols) for s in stride]
    except (_symexpr.ExprError, KeyError, TypeError, ValueError, ArithmeticError):
        return t  # a record without the sizes its layout needs: the stored layout stays (the probe's contract check judges it)
    if list(t.stride()) == want or t.numel() == 0:
        return t
    try:
        out = torch.empty_strided(tuple(t.shape), tuple(want), dtype=t.dtype)
        out.copy_(t)
    except (RuntimeError, MemoryError):  # a negative or overlapping layout from an edited record: as above
        return t
    return out


def op_import_modules(state: State, modules: list[str]) -> list[str]:
    """Import the modules that register the package's user ops (runtime/user_modules.py), before a
    load: the build sends its TARGET's module to a child started before it knew the program had any."""
    from runtime_probe.runtime import user_modules

    for spec in modules:
        user_modules.import_module(spec)
    return list(modules)


class ImportOnce:
    """The ``IMPORT_ENV`` modules, imported before the first request runs; a failure is kept and
    raised again for every request (no request runs without them)."""

    def __init__(self, specs: list[str]) -> None:
        self.specs = specs
        self.failure: Exception | None = None

    def ensure(self, state: State) -> None:
        if self.failure is not None:
            raise self.failure
        if not self.specs:
            return
        specs, self.specs = self.specs, []
        try:
            op_import_modules(state, specs)
        except Exception as exc:
            self.failure = ImportError(f"importing {', '.join(specs)} {IMPORT_FAILED} {type(exc).__name__}: {exc}")
            raise self.failure from exc


def op_ping(state: State) -> dict[str, Any]:
    return {"pid": os.getpid()}


def op_selftest(state: State, action: str, **kw: Any) -> Any:
    """Misbehaviour on request, for the tests of child.py (enabled by RUNTIME_PROBE_SELFTEST=1)."""
    import signal
    import subprocess

    if action == "signal":
        sys.stdout.write("about to die\n")
        sys.stdout.flush()
        sys.stderr.write("Error: selftest native failure\n")
        sys.stderr.flush()
        os.kill(os.getpid(), getattr(signal, kw.get("name", "SIGSEGV")))
    elif action == "hang":
        # A grandchild that would outlive us unless the whole process group is killed.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(kw["pidfile"], "w") as fh:
            fh.write(str(child.pid))
        time.sleep(600)
    elif action == "print":
        chunk = "x" * 1023 + "\n"
        for _ in range(int(kw.get("kib", 1024))):
            sys.stdout.write(chunk)
            sys.stderr.write(chunk)
        sys.stdout.flush()
        return "printed"
    elif action == "raise":
        if kw.get("note"):  # as AOTI's C++ logs the real reason to fd 2 just before raising
            os.write(2, (str(kw["note"]) + "\n").encode())
        raise RuntimeError("selftest error")
    elif action == "exit":
        os._exit(int(kw.get("code", 7)))
    elif action == "alloc":
        blob = bytearray(int(kw["bytes"]))
        return len(blob)
    return None


OPS: dict[str, Callable[..., Any]] = {
    "facts": op_facts,
    "load": op_load,
    "load_weights": op_load_weights,
    "constant_digests": op_constant_digests,
    "run": op_run,
    "throughput": op_throughput,
    "ping": op_ping,
    "import_modules": op_import_modules,
}
if os.environ.get("RUNTIME_PROBE_SELFTEST") == "1":
    OPS["selftest"] = op_selftest
