"""The guarded loader: ``runtime_probe.load(path)`` returns a callable with the model's signature
that checks every call against the manifest BEFORE native code runs.

Plain AOTI answers a smaller, larger, transposed, out-of-range, wrong-dtype or wrong-device input
with garbage (or an out-of-bounds read); its own checks, when enabled, name inputs by position
only. Here every violation raises InputContractError naming the argument:
``x: dim 0 is 100, above the maximum 64 of 'batch'``. After the call, every tensor output must be
on the device the manifest records for it, or OutputContractError (``output.device``) names it.

The checks themselves live in ``inputs.py`` and ``outputs.py``.
"""

from __future__ import annotations

import copy
import difflib
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack, cast

from runtime_probe.formats import treespec as _treespec
from runtime_probe.guard.fastpath import compile_fast_flat
from runtime_probe.guard.inputs import InputChecker, LeafInputs
from runtime_probe.guard.outputs import OutputDevices
from runtime_probe.guard.values import DeviceValues, check_mode_name, resolve_mode, value_check, value_ranges
from runtime_probe.guard.weights import UnsetConstants, checked_constants, read_kept_constants, read_weights_file
from runtime_probe.host.rules import parse_device
from runtime_probe.host.skew import torch_to_install
from runtime_probe.package.archive import Archive, open_archive
from runtime_probe.package.extractions import remove_failed_load
from runtime_probe.package.kernel_files import kernel_file_finding, model_folders
from runtime_probe.package.manifest import Manifest
from runtime_probe.package.private_copy import private_copy, tmpdir_finding
from runtime_probe.package.release_constants import ReleaseConstantsError, share_release_constants
from runtime_probe.package.twin import materialize_twin, twin_constants_from
from runtime_probe.reporting.errors import PackageRejected, ToolError, UsageError
from runtime_probe.reporting.findings import Finding, error, has_errors
from runtime_probe.runtime import layout, torch_compat, user_modules

__all__ = ["GuardedModel", "LoadOptions", "load"]

_MISSING = object()


class LoadOptions(TypedDict, total=False):
    """``load``'s options after the path and the device, each given by its name. One value object
    (PEP 692): mypy checks each name and type at the caller's call, and ``load`` refuses a name
    it does not know (UsageError) as Python refused an unknown keyword before. The defaults:
    ``_DEFAULTS``."""

    model: str
    verify: bool
    public_key: str | os.PathLike[str] | None
    check_values: bool | str | None
    weights: str | os.PathLike[str] | Mapping[str, Any] | None
    num_runners: int


_DEFAULTS: LoadOptions = {
    "model": layout.RELEASE_MODEL,
    "verify": True,
    "public_key": None,
    "check_values": None,
    "weights": None,
    "num_runners": 1,
}


def load(path: str | os.PathLike[str], device: str | None = None, **options: Unpack[LoadOptions]) -> GuardedModel:
    """Verify a package and load it in this process behind its input contract.

    Args (the options after ``device`` are ``LoadOptions``, each given by name):
        path: the .pt2 built by aoti-guard.
        device: "cpu", "cuda" or "cuda:N"; default: the device it was built for.
        model: "model" (the release model) or "debug_twin" (the sanitized twin).
        verify: check every entry's SHA-256 against the manifest first (reads the whole file).
        public_key: an Ed25519 public key file (PEM, from ``aoti-guard keygen``): the package must
            carry a valid signature by it (checked before the manifest's hashes are believed).
        check_values: check integer inputs against the value range the build recorded (an id
            past an embedding table, which aborts the process on CPU and leaves the CUDA context
            unusable on GPU). ``None`` (default): the device's default, ``values.DEFAULT_MODE``,
            "sync" on CPU and CUDA: the values read before the call and ``input.value_range``
            raised (on CUDA the read synchronises the device). ``True`` is "sync"; ``"device"``
            clamps the ids on the device and returns a bad call's outputs as NaN, with no device
            sync (``GuardedModel.raise_for_values()`` raises for it). ``False`` ("off") reads
            nothing: an out-of-range id then reaches native code and can abort the process or
            leave the CUDA context unusable.
        weights: new weights, checked and loaded before the model is returned
            (``GuardedModel.load_constants``): a safetensors file (a ``state_dict()`` or a
            ``save_pretrained`` file, as it is) or a ``{name: tensor}`` map. A package built without
            its weights (``aot_inductor.package_constants_in_so=False``) needs them: without, every
            call raises ConstantsContractError naming the constants never set, until
            ``load_constants`` has given them (a call would read unset memory: SIGSEGV).
        num_runners: how many calls may run at once, from as many threads (AOTInductor's
            ``num_runners``; each runner holds its own activations). The default, 1, makes
            concurrent callers wait for each other: ``aoti-guard probe --threads`` measures it.

    Raises:
        PackageRejected: unsafe archive, missing or invalid signature, hash mismatch, no
            manifest, or a kernel file the model's generated code loads is not in the package
            (``package.kernel_file_missing``: its first call would fail with a CUDA error naming
            no file); ``.findings`` says which.
        UsageError: an argument of the wrong type, a path that no file can have (a NUL in it), a
            bad device string, model name, check_values or public key file: before anything is read.
        ConstantsContractError: ``weights`` do not fit the package (``.constant`` names the first
            tensor refused); nothing was copied into the model.
        ToolError: this process cannot load it: ``.code`` is ``env.tmpdir_unusable`` (TMPDIR
            missing, full or read-only: the package is copied and extracted there) or
            ``env.torch_missing`` (torch cannot be imported).
    """
    opts = _with_defaults(options)
    guarded = _load_private_copy(_checked_request(path, device, opts))
    if opts["weights"] is not None:
        guarded.load_constants(opts["weights"])
    return guarded


def _checked_request(path: object, device: str | None, opts: LoadOptions) -> _LoadRequest:
    """``load``'s arguments checked, before anything is read: a UsageError names the first bad one."""
    # signature checking is only imported when a package is loaded: `import runtime_probe` stays light
    from runtime_probe.trust.signature import load_public_key

    fspath = _path_argument(path, "path")
    _check_arguments(device, opts["model"], opts["verify"], opts["check_values"])
    key = None
    if opts["public_key"] is not None:
        if not opts["verify"]:
            raise UsageError("public_key needs verify=True", hint="a signature only covers the entries whose hashes are checked")
        key = load_public_key(_path_argument(opts["public_key"], "public_key"))
    runners = opts["num_runners"]
    if isinstance(runners, bool) or not isinstance(runners, int) or runners < 1:
        raise UsageError(
            f"num_runners must be a whole number of at least 1, not {runners!r}", hint="e.g. num_runners=4 for 4 serving threads"
        )
    return _LoadRequest(fspath, device, opts["model"], opts["verify"], key, opts["check_values"], runners)


def _with_defaults(options: Mapping[str, Any]) -> LoadOptions:
    """``options`` over ``_DEFAULTS``, or a UsageError naming an option ``load`` does not have."""
    known = sorted(LoadOptions.__optional_keys__)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            raise UsageError(
                f"runtime_probe.load got an unknown option {name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""),
                hint=f"load(path, device=None, {', '.join(f'{k}=...' for k in known)})",
            )
    return cast(LoadOptions, {**_DEFAULTS, **options})


def _path_argument(value: object, what: str) -> str:
    """``value`` as a path string, or a UsageError that says what is wrong with it: os and open
    would raise a bare TypeError (not a path) or ValueError (a NUL character) deep in the load."""
    try:
        text = os.fspath(value)  # type: ignore[call-overload]
    except TypeError:
        raise UsageError(
            f"runtime_probe.load: {what} must be a path, not {type(value).__name__}", hint="pass a str or os.PathLike (pathlib.Path)"
        ) from None
    text = os.fsdecode(text)
    if not text:
        raise UsageError(f"runtime_probe.load: {what} is empty", hint="pass the .pt2 file's path")
    if "\0" in text:
        raise UsageError(
            f"runtime_probe.load: {what} {text!r} holds a NUL character, which no file name can",
            hint="pass the path as it is on disk (a NUL usually means a C string or a buffer was passed whole)",
        )
    return text


def _check_arguments(device: object, model: object, verify: object, check_values: object) -> None:
    """The other arguments' types and names, before anything is read or copied."""
    if device is not None and not isinstance(device, str):
        raise UsageError(f"runtime_probe.load: device must be a str, not {type(device).__name__}", hint="use 'cpu', 'cuda' or 'cuda:N'")
    if not isinstance(model, str) or model not in (layout.RELEASE_MODEL, layout.TWIN_MODEL):
        raise UsageError(f"unknown model {model!r}", hint=f"use {layout.RELEASE_MODEL!r} or {layout.TWIN_MODEL!r}")
    if not isinstance(verify, bool):
        raise UsageError(f"runtime_probe.load: verify must be a bool, not {type(verify).__name__}", hint="use verify=True or verify=False")
    check_mode_name(check_values)


def _tmpdir_error(exc: OSError, folder: str) -> ToolError:
    """``env.tmpdir_unusable`` as an exception: the probe's finding, said by the loader."""
    finding = tmpdir_finding(exc, os.path.join(folder, "x"), "load", who="runtime_probe.load")
    return ToolError(finding.message, hint=finding.hint, code=finding.code)


def _missing_op_error(op: str, manifest: Manifest) -> ToolError:
    """``load.missing_op`` as an exception: a user op this process never registered, and the remedy."""
    ops = list(manifest.user_code.custom_ops) if manifest.user_code is not None and manifest.user_code.custom_ops else [op]
    return ToolError(
        f"runtime_probe.load: the package calls the custom op {op}, which this process has not registered "
        f"(expected registered before the load: {', '.join(ops)}, the manifest's user_code.custom_ops; found: torch has no schema for {op})",
        hint="import the Python module that defines the op(s) with torch.library in this process before runtime_probe.load",
        code="load.missing_op",
    )


def _import_torch(manifest: Manifest) -> None:
    """torch, or a ToolError that says how to get it (``env.torch_missing``), not a traceback."""
    try:
        import torch  # noqa: F401 - imported here to turn its absence into an error with a hint
    except ImportError as exc:
        wanted = manifest.toolchain.torch
        raise ToolError(
            f"runtime_probe.load needs torch to load the package, and this Python cannot import it: {exc}",
            hint=f"install {torch_to_install(wanted, manifest.target.device_type)} in this environment",
            code="env.torch_missing",
        ) from None


@dataclass(frozen=True)
class _LoadRequest:
    """``load``'s checked arguments: the package's path, the device and model asked for, whether
    to verify hashes, the signing key (or None) the value-check mode and the runners (calls that may run at once)."""

    fspath: str
    device: str | None
    model: str
    verify: bool
    key: Any
    check_values: bool | str | None
    num_runners: int = 1


def _load_private_copy(req: _LoadRequest) -> GuardedModel:
    """The package loaded from a private copy (the bytes verified are the bytes loaded), removed
    once torch has extracted it. TMPDIR as given: torch extracts the package there too, and does
    not fall back to /tmp."""
    where = os.environ.get("TMPDIR") or None
    try:
        private = tempfile.mkdtemp(prefix="runtime-probe-load-", dir=where)
    except OSError as exc:
        raise _tmpdir_error(exc, where or tempfile.gettempdir()) from None
    try:
        try:
            copied = private_copy(req.fspath, private)
        except OSError as exc:
            raise _tmpdir_error(exc, private) from None
        return _load_verified(req, copied)
    finally:
        shutil.rmtree(private, ignore_errors=True)


@dataclass(frozen=True)
class _Opened:
    """What the verified archive gave: its manifest, the device to load on, the model's file and
    name (the twin's materialized folder for the debug twin, else None), and the values of the
    constants no checkpoint holds (a package without weights)."""

    manifest: Manifest
    device_type: str
    index: int | None
    load_path: str
    model_name: str
    twin_dir: str | None
    kept: Any


def _load_verified(req: _LoadRequest, copy: str) -> GuardedModel:
    opened = _open_verified(req, copy)
    _import_torch(opened.manifest)
    since = time.time()
    try:
        compiled = torch_compat.make_package_loader(opened.load_path, opened.model_name, opened.index, req.num_runners)
    except RuntimeError as exc:
        remove_failed_load(copy, since)  # torch extracted it, weights and all, and never removes a refused one
        op = user_modules.missing_op(str(exc))
        if op is not None:
            raise _missing_op_error(op, opened.manifest) from None
        if "Error generating temporary directory" not in str(exc):
            raise
        raise _tmpdir_error(OSError(0, str(exc).splitlines()[0]), os.environ.get("TMPDIR") or tempfile.gettempdir()) from None
    twin = opened.twin_dir is not None
    if twin:  # a twin without weights: it must not be callable before it has them
        _share_twin_constants(req.fspath, copy, opened, compiled)
    # the twin's own call wrapper is flat (aoti_guard/builder/twin/schedule.py): its call structure is the
    # release model's, which the manifest records
    guarded = GuardedModel(
        compiled,
        opened.manifest,
        _torch_device(opened.device_type, opened.index),
        check_values=req.check_values,
        flat_call=twin,
        # the release model of a package without weights: nothing may call it before it has them
        unset=UnsetConstants.for_package(opened.manifest) if not twin else None,
    )
    if opened.twin_dir is not None:
        weakref.finalize(guarded, shutil.rmtree, opened.twin_dir, True)
    if opened.kept is not None:  # a package without weights: what no checkpoint holds comes from the package
        from runtime_probe.formats import safetensors as _safetensors

        guarded.load_constants(_safetensors.load(opened.kept, device=str(guarded.device)), check_full_update=False)
    return guarded


def _open_verified(req: _LoadRequest, copy: str) -> _Opened:
    """The private copy's archive checked (signature, hashes, manifest), the device resolved and,
    for the debug twin, its model materialized; PackageRejected / UsageError otherwise."""
    archive, findings = open_archive(copy)
    if archive is None:
        raise PackageRejected(f"{req.fspath} is not a usable package", findings)
    with archive:
        manifest = _trusted_manifest(req, archive, findings)
        device_type, index = _target_device(req.device, manifest)
        _refuse_missing_kernels(req, archive, manifest)
        load_path, model_name, tmp = copy, manifest.model_name, None
        if req.model == layout.TWIN_MODEL:
            tmp = tempfile.mkdtemp(prefix="runtime-probe-twin-")
            twin = materialize_twin(archive, manifest, tmp)
            if twin is None:
                shutil.rmtree(tmp, ignore_errors=True)
                raise UsageError(f"{req.fspath} has no debug twin", hint="it was built with --no-debug-twin")
            load_path, model_name = twin, layout.TWIN_MODEL
        kept = read_kept_constants(archive, manifest) if tmp is None else None
    return _Opened(manifest, device_type, index, load_path, model_name, tmp, kept)


def _refuse_missing_kernels(req: _LoadRequest, archive: Archive, manifest: Manifest) -> None:
    """PackageRejected (``package.kernel_file_missing``) when the model asked for lacks a kernel
    file its generated code loads: torch would load it, and its first call would fail with a CUDA
    error that names no file."""
    folders = model_folders(manifest)  # the release model first, then the twin when there is one
    chosen = folders[0] if req.model == layout.RELEASE_MODEL else folders[1] if len(folders) > 1 else None
    finding = kernel_file_finding(archive, *chosen) if chosen is not None else None
    if finding is not None:
        raise PackageRejected(f"{req.fspath} cannot run", [finding])


def _trusted_manifest(req: _LoadRequest, archive: Archive, findings: list[Finding]) -> Manifest:
    """The archive's manifest once its signature and hashes hold; PackageRejected otherwise."""
    from runtime_probe.trust.check import check_archive

    # a package without a manifest is refused below: reading its entries would be wasted
    trust = check_archive(archive, req.key, verify_hashes=req.verify and archive.has(layout.MANIFEST))
    findings = [*findings, *trust.findings]
    if has_errors(findings):
        first = next(f for f in findings if f.severity.value == "error")
        raise PackageRejected(
            f"{req.fspath} failed its archive checks: {first.code}: {first.message}",
            findings,
            hint="do not load it: fetch the released file again",
        )
    if trust.manifest is None:
        raise PackageRejected(
            f"{req.fspath} has no aoti-guard manifest",
            [*findings, error("manifest.missing", "archive", "no manifest: nothing to guard inputs with")],
            hint="build it with aoti-guard build",
        )
    return trust.manifest


def _target_device(device: str | None, manifest: Manifest) -> tuple[str, int | None]:
    """(device type, index) to load on: the package's own device type unless ``device`` names
    one, which must be the package's."""
    if device is None:
        return manifest.target.device_type, None
    try:
        device_type, index = parse_device(device)
    except ValueError:
        raise UsageError(f"unknown device {device!r}", hint="use cpu, cuda or cuda:N") from None
    if device_type != manifest.target.device_type:
        raise UsageError(
            f"the package was compiled for {manifest.target.device_type}, not {device_type}",
            hint=f"load it with device={manifest.target.device_type!r}",
        )
    return device_type, index


def _share_twin_constants(fspath: str, copy: str, opened: _Opened, compiled: Any) -> None:
    """A debug twin built without weights takes the release model's; PackageRejected when it cannot."""
    constants_from = twin_constants_from(copy, opened.manifest)
    if constants_from is None:
        return
    try:
        share_release_constants(compiled, constants_from["path"], constants_from["model_name"], opened.device_type, opened.index)
    except ReleaseConstantsError as exc:
        if opened.twin_dir is not None:
            shutil.rmtree(opened.twin_dir, ignore_errors=True)
        raise PackageRejected(
            f"{fspath}: the debug twin could not be given the release model's weights",
            [error("load.error", "load", str(exc), hint="load the release model (model='model'); rebuild with --twin-weights own")],
            hint="the release model is unaffected",
        ) from None


def _torch_device(device_type: str, index: int | None) -> Any:
    """The torch device to load on: a CUDA package without an index takes the current device."""
    import torch

    resolved = _resolve_index(device_type, index)
    return torch.device(device_type, resolved) if resolved is not None else torch.device(device_type)


def _resolve_index(device_type: str, index: int | None) -> int | None:
    if device_type != "cuda":
        return None
    if index is not None:
        return index
    import torch

    return int(torch.cuda.current_device())


class GuardedModel:
    """A loaded package that checks each call against its contract, then runs it.

    Call it like the original model (positional or keyword arguments, by the names of forward()).
    ``check(*args, **kwargs)`` validates without running. ``compiled`` is torch's own callable.
    ``check_values`` (see ``load``; ``value_mode`` says which was chosen): integer inputs are also
    checked against the value ranges in the manifest, by reading them ("sync") or on the device
    ("device": ``raise_for_values()`` raises for the last call). ``device``: the torch.device
    (or its string) the package was loaded on. Each call's tensor outputs are checked against the
    devices the manifest records for them (``outputs.py``): OutputContractError names one that
    came back elsewhere.

    ``flat_call``: the package's own call wrapper is not the model's (the debug twin's takes and
    returns flat leaves): the call structure is the manifest's, and every call runs on the flat
    leaves.

    ``unset``: the constants that were never set (a package built without its weights): every
    call raises ConstantsContractError naming them until ``load_constants`` has set them. Shared
    with deep copies, which share the native model.
    """

    def __init__(
        self,
        compiled: Any,
        manifest: Manifest,
        device: Any,
        *,
        check_values: bool | str | None = None,
        flat_call: bool = False,
        unset: UnsetConstants | None = None,
    ) -> None:
        import torch

        self._unset = unset if unset is not None else UnsetConstants(())
        self.compiled = compiled
        self.manifest = manifest
        self.device = torch.device(device)
        self.value_mode = resolve_mode(check_values, self.device.type, manifest)  # "sync" | "device" | "off"
        self.check_values = self.value_mode != "off"
        self.flat_call = flat_call
        self.checker = InputChecker(manifest, self.device, check_values=self.value_mode == "sync")
        self._device_values = DeviceValues(manifest, torch) if self.value_mode == "device" else None
        # where each tensor output must come back (package/placement.py), resolved once: a call
        # compares one device per output after the native call (outputs.py)
        self._outputs = OutputDevices(manifest, self.device, torch)
        spec = (manifest.io.in_spec, manifest.io.out_spec) if flat_call else _package_call_spec(compiled)
        self._direct = _direct_call(compiled, manifest, self.device, torch, spec)
        # the range-checked inputs' places in the direct path's flat list: read ("sync") or clamped ("device")
        ranges = value_ranges(manifest) if self._direct is not None and self.value_mode != "off" else {}
        ranged = [(i, n) for i, n in enumerate(self._direct.order if self._direct is not None else []) if n in ranges]
        self._flat_ranged = ranged if self.value_mode == "device" else []
        self._flat_values = [(i, value_check(n, ranges[n], torch)) for i, n in ranged] if self.value_mode == "sync" else []
        self._unflatten = _output_unflattener(manifest, spec)
        self._rebuild = self._unflatten if flat_call else _output_rebuilder(compiled, manifest, spec)
        self._leaf_order = list(dict.fromkeys(i.param for i in manifest.io.inputs))
        self.__signature__ = self.checker.signature

    def __repr__(self) -> str:
        return f"GuardedModel({', '.join(self.checker.param_names)}) on {self.device}"

    def __deepcopy__(self, memo: dict[int, Any]) -> GuardedModel:
        """Like torch's own AOTICompiledModel: the copy shares the loaded native model (its
        weights included: load_constants on one changes both), and gets its own checker."""
        return GuardedModel(
            copy.deepcopy(self.compiled, memo),
            self.manifest,
            self.device,
            check_values=self.value_mode,
            flat_call=self.flat_call,
            unset=self._unset,
        )

    def check(self, *args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return self.checker.check(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The hot path: the generated check returns the flat tensor list torch's runner takes, and
        # the call skips torch's own wrapper (which parses its pytree specs again on every call).
        # A call it does not accept goes through checker.check (diagnoses).
        if self._unset.names:  # a package without weights, not given yet: native code would read unset memory
            raise self._unset.error()
        direct = self._direct
        if direct is not None:
            try:
                flat = direct.check(*args, **kwargs)
            except Exception:  # noqa: BLE001 - a hostile object or a binding error: check() says what
                flat = None
            if flat is not None:
                for i, check in self._flat_values:  # "sync": raises before native code runs
                    check(flat[i])
                dev = self._device_values
                if dev is None:
                    return direct.unflatten(self._outputs.check(direct.run(flat)))
                safe, ok = dev.clamp([(n, flat[i]) for i, n in self._flat_ranged])
                for (i, _), t in zip(self._flat_ranged, safe):
                    flat[i] = t
                return direct.unflatten(dev.poison(self._outputs.check(direct.run(flat)), ok))
        call_args, call_kwargs = self.checker.check(*args, **kwargs)
        if self._device_values is not None:
            return self._run_clamped(self._device_values, call_args, call_kwargs)
        return self._run(call_args, call_kwargs)

    def raise_for_values(self) -> None:
        """With ``value_mode == "device"``: synchronise on this thread's last call and raise the
        InputContractError (``input.value_range``) that "sync" would have raised before it, when it
        had a value out of range (its outputs are NaN). A no-op in the other modes."""
        if self._device_values is not None:
            self._device_values.raise_for_last_call()

    def _run_clamped(self, dev: DeviceValues, call_args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> Any:
        """The call with every range-checked argument (top-level: ``device_problem``) clamped, and its
        outputs poisoned when one was out of range."""
        positional = self.checker.positional_names
        args, kwargs = list(call_args), dict(call_kwargs)
        named = [(n, args[positional.index(n)] if n in positional else kwargs[n]) for n in dev.ranges]
        safe, ok = dev.clamp(named)
        for (n, _), t in zip(named, safe):
            if n in positional:
                args[positional.index(n)] = t
            else:
                kwargs[n] = t
        return dev.poison_tree(self._run(tuple(args), kwargs), ok)

    def _run(self, call_args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> Any:
        by_name = any(isinstance(v, LeafInputs) for v in (*call_args, *call_kwargs.values()))
        if self._rebuild is not None or by_name:
            # a type torch cannot rebuild here, or an argument given by its leaf names: run flat
            import torch
            from torch.utils import _pytree as pytree

            # the runner takes the leaves in the export's order (positional, then the keywords as
            # the example passed them), not forward()'s: the manifest's inputs are in that order
            values = {**dict(zip(self.checker.positional_names, call_args)), **call_kwargs}
            leaves: list[Any] = []
            for param in self._leaf_order:
                v = values[param]
                leaves += list(v.values()) if isinstance(v, LeafInputs) else pytree.tree_leaves(v)
            outputs = self.compiled.loader.boxed_run([t for t in leaves if isinstance(t, torch.Tensor)])
            return (self._rebuild or self._unflatten)(self._outputs.check(outputs))
        return self._outputs.check_tree(self.compiled(*call_args, **call_kwargs))

    def load_constants(self, tensors: Mapping[str, Any] | str | os.PathLike[str], *, check_full_update: bool = True) -> None:
        """Swap in new weights after checking names, shapes, dtypes, devices, layouts and storage
        sizes against the manifest: nothing is copied unless every tensor fits.

        ``tensors``: a ``{name: tensor}`` map (``model.state_dict()`` as it is), or a safetensors
        file (a ``state_dict()`` or ``save_pretrained`` file; its header is checked before any
        tensor is read). Constants no ``state_dict()`` holds (non-persistent buffers such as a
        rotary ``inv_freq``, lifted tensor constants) keep the package's values unless given; a
        tied constant (``lm_head.weight`` = ``embed_tokens.weight``) takes the tensor of whichever
        of its names is given (packages built before manifest 1.7 record neither: every constant
        must be given). ``check_full_update``: every other constant must be given; False swaps
        the ones given.

        A weight must be a plain, dense, contiguous tensor that owns its storage: torch's
        load_constants reads its memory as the compiled layout (a transposed view of the right
        shape would silently give wrong outputs) and copies its whole storage from the view's
        start (a contiguous slice of a larger tensor writes past the constant: SIGSEGV). It is
        refused (not copied): a copy would double the memory of a weight swap without the
        caller knowing; ``.contiguous()`` or ``.clone()`` is the caller's choice.

        Raises:
            ConstantsContractError: before torch's load_constants is called, naming the constant.
        """
        if isinstance(tensors, (str, os.PathLike)):
            tensors = read_weights_file(self.manifest, os.fspath(tensors), self.device, check_full_update=check_full_update)
        constants = checked_constants(self.manifest, tensors, self.device, check_full_update=check_full_update)
        # every constant left out is one the package keeps (or, check_full_update=False, the
        # caller's choice): torch's own full check would only print warnings for them
        self.compiled.load_constants(constants, check_full_update=False)
        self._unset.loaded(constants)


class _Direct:
    """The hot path of a flat signature: check -> flat tensor list -> runner -> outputs.
    ``order``: the parameter names of the flat list's tensors."""

    __slots__ = ("check", "order", "run", "unflatten")

    def __init__(self, check: Any, run: Any, unflatten: Any, order: list[str]) -> None:
        self.check, self.run, self.unflatten, self.order = check, run, unflatten, order


def _package_call_spec(compiled: Any) -> tuple[str, str] | None:
    """The package's own (in, out) treespecs as torch's loader reports them; None without one."""
    loader = getattr(compiled, "loader", None)
    if loader is None or not hasattr(loader, "get_call_spec"):
        return None
    try:
        in_text, out_text = loader.get_call_spec()
    except Exception:  # noqa: BLE001 - a runtime that cannot say
        return None
    return str(in_text), str(out_text)


def _direct_call(compiled: Any, manifest: Manifest, device: Any, torch: Any, spec: tuple[str, str] | None) -> _Direct | None:
    """The runner call that torch's AOTICompiledModel.__call__ makes, with its specs parsed once:
    flat inputs are the positional arguments, then the keyword ones in the spec's order, tensors
    only; outputs are unflattened with the spec. None where the package or torch differs from
    that (a nested signature, another wrapper): every call then goes through ``compiled``."""
    loader = getattr(compiled, "loader", None)
    if loader is None or not hasattr(loader, "boxed_run") or spec is None:
        return None
    from torch.utils import _pytree as pytree

    try:
        in_text, out_text = spec
        in_spec, out_spec = _treespec.load(in_text), _treespec.load(out_text)
        if in_spec is None or out_spec is None:
            return None
        args_spec, kwargs_spec = _children(in_spec)
        keys = list(kwargs_spec.context or [])
        if not all(c.is_leaf() for c in [*_children(args_spec), *_children(kwargs_spec)]):
            return None
    except Exception:  # noqa: BLE001 - a spec this code does not know: keep torch's own call
        return None
    params = [p for p in manifest.io.params if p.passed != "omitted"]
    positional = [p.name for p in params if p.passed == "positional"]
    if len(_children(args_spec)) != len(positional) or sorted(keys) != sorted(p.name for p in params if p.passed == "keyword"):
        return None
    tensors = {i.param for i in manifest.io.inputs if i.kind == "tensor"}
    order = [n for n in positional + keys if n in tensors]
    check = compile_fast_flat(manifest, device, torch, order)
    if check is None:
        return None
    if out_spec.is_leaf():
        return _Direct(check, loader.boxed_run, _first, order)
    return _Direct(check, loader.boxed_run, lambda outputs: pytree.tree_unflatten(outputs, out_spec), order)


class NamedOutputs(dict):  # type: ignore[type-arg]
    """The outputs of a package whose output type (a Hugging Face ``ModelOutput``, a cache) cannot
    be imported in this process: a dict from the manifest's leaf names (``last_hidden_state``,
    ``past_key_values.0.key``) to tensors, in output order; top-level names also read as
    attributes (``out.last_hidden_state``), and ``to_tuple()`` gives the tensors in order."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_tuple(self) -> tuple[Any, ...]:
        return tuple(self.values())


def _output_rebuilder(compiled: Any, manifest: Manifest, spec: tuple[str, str] | None) -> Any:
    """None when torch can rebuild the outputs itself (its own call works); else a function from
    the runner's flat outputs to ``NamedOutputs`` (after importing the type's library, when it is
    installed, the original type)."""
    loader = getattr(compiled, "loader", None)
    if loader is None or not hasattr(loader, "boxed_run") or spec is None:
        return None
    from torch.utils import _pytree as pytree

    in_text, out_text = spec
    out_spec = _treespec.load(out_text)
    if out_spec is not None and _treespec.load(in_text) is not None:
        return None
    if out_spec is not None:
        return lambda outputs: pytree.tree_unflatten(outputs, out_spec)
    names = [o.name for o in manifest.io.outputs if o.tensor is not None]
    return lambda outputs: NamedOutputs(zip(names, outputs))


def _output_unflattener(manifest: Manifest, spec: tuple[str, str] | None) -> Any:
    """From the runner's flat outputs to the original type (its library importable) or
    ``NamedOutputs``: for a call given by leaf names, which torch's own call cannot take."""
    out_spec = _treespec.load(spec[1]) if spec is not None and spec[1] else None
    if out_spec is not None:
        from torch.utils import _pytree as pytree

        return lambda outputs: pytree.tree_unflatten(outputs, out_spec)
    names = [o.name for o in manifest.io.outputs if o.tensor is not None]
    return lambda outputs: NamedOutputs(zip(names, outputs))


def _first(outputs: list[Any]) -> Any:
    return outputs[0]


def _children(spec: Any) -> list[Any]:
    # torch 2.13 deprecates children_specs for children(); older releases have only the former
    return list(spec.children() if hasattr(spec, "children") else spec.children_specs)
