"""The guarded loader's weights: new tensors checked against the manifest before torch copies a
byte of them, and the constants a package without weights has not been given yet.

torch's ``load_constants`` (``update_constant_buffer`` in the AOTI container) checks only the
device type, then copies the tensor's whole storage from its data pointer into the constant's
place and rebuilds the constant with the tensor's own strides and storage offset: a wrong shape,
dtype or size is reinterpreted, a transposed tensor is read in the wrong order, and a slice of a
larger tensor writes past the constant (heap corruption, SIGSEGV). Which tensor goes where is
``runtime_probe.package.weights.plan_weights``'s decision (the probe's ``--weights`` makes it
too); this module adds what only tensors can show: their kind, device, layout and storage.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

from runtime_probe.guard.rules import plain_tensor_types
from runtime_probe.package.archive import Archive
from runtime_probe.package.manifest import ConstantSpec, Manifest
from runtime_probe.package.weights import ValueChecks, carries_weights, check_weights, keeps_unsaved, plan_weights
from runtime_probe.reporting.errors import ConstantsContractError, PackageRejected
from runtime_probe.reporting.findings import Finding, error

__all__ = ["UnsetConstants", "checked_constants", "read_kept_constants", "read_weights_file"]


def checked_constants(manifest: Manifest, tensors: Mapping[str, Any], device: Any, *, check_full_update: bool) -> dict[str, Any]:
    """``tensors`` (given names -> tensors) as the ``{constant: tensor}`` map torch's
    ``load_constants`` takes, every tensor checked; a tied constant maps to its tied name's tensor,
    a constant no checkpoint holds is left out (it keeps the package's value).

    Raises:
        ConstantsContractError: the first tensor that does not fit, by name.
    """
    for fqn, t in tensors.items():
        check_weight_kind(fqn, t)  # before its shape is read: a subclass may lie about it
    given = {fqn: (str(t.dtype).replace("torch.", ""), tuple(t.shape)) for fqn, t in tensors.items()}
    plan = plan_weights(
        given,
        manifest.constants,
        source="the new weights",
        full=check_full_update,
        keeps=keeps_unsaved(manifest),
        values=ValueChecks(
            same_tensor=lambda a, b: _same_values(tensors[a], tensors[b]),
            build_value=lambda name, spec: _holds_build_value(tensors[name], spec),
        ),
    )
    raise_first(plan.findings)
    for fqn in plan.names:
        _check_placement(fqn, tensors[fqn], device)
    return {name: tensors[src] for name, src in plan.sources.items()}


def read_weights_file(manifest: Manifest, path: str, device: Any, *, check_full_update: bool) -> dict[str, Any]:
    """The tensors of a safetensors file that the package takes, read once its header passed the
    probe's ``--weights`` check (``check_weights``): a bad file is refused before any tensor is
    read. Raises ConstantsContractError."""
    from runtime_probe.formats import safetensors as _safetensors

    check = check_weights(path, manifest.constants, keeps=keeps_unsaved(manifest), compare_build=False)
    raise_first([f for f in check.findings if check_full_update or f.code != "constants.missing"])
    return _safetensors.load(path, names=check.names, device=str(device))


def read_kept_constants(archive: Archive, manifest: Manifest) -> bytes | None:
    """The bytes of ``manifest.kept_constants`` (a package without weights: the values of the
    constants no checkpoint holds), read while the archive is open; None without one. The entry
    holds a few derived buffers: it is refused past the size of the constants it may hold (plus
    its header), as any entry whose size the manifest bounds."""
    entry = manifest.kept_constants
    if entry is None or carries_weights(manifest):
        return None
    bound = sum(c.nbytes for c in manifest.package_constants() if c.in_state_dict is False) + (1 << 20)
    try:
        return archive.read(entry, max_bytes=bound)
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as exc:
        message = f"the package's kept constants ({entry}) cannot be read: {exc}"
        raise PackageRejected(message, [error("archive.unreadable", "archive", message)], hint="fetch the released file again") from None


class UnsetConstants:
    """The loaded model's constants that were never set (a package built without its weights):
    shared by a GuardedModel and its deep copies, which share the native model, so a
    ``load_constants`` on one sets them for all."""

    __slots__ = ("names",)

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    @classmethod
    def for_package(cls, manifest: Manifest) -> UnsetConstants:
        """Every runtime constant of a package built without its weights; none otherwise."""
        if carries_weights(manifest):
            return cls(())
        return cls(sorted(c.loaded_name for c in manifest.package_constants()))

    def loaded(self, constants: Mapping[str, Any]) -> None:
        self.names = tuple(n for n in self.names if n not in constants)

    def error(self) -> ConstantsContractError:
        """What a call raises while constants are unset."""
        n = len(self.names)
        shown = ", ".join(self.names[:8]) + (f" and {n - 8} more" if n > 8 else "")
        return ConstantsContractError(
            "the model was not called: the package carries no weights (built with aot_inductor.package_constants_in_so=False) "
            f"and {n} of its constant(s) were never set: {shown}; a call would read unset memory (SIGSEGV)",
            code="constants.missing",
            constant=self.names[0],
            expected="every constant loaded",
            found=f"{n} never set",
            hint="give the weights first: runtime_probe.load(pkg, weights='model.safetensors') or model.load_constants(state_dict) "
            "(a state_dict() or save_pretrained safetensors file works as it is)",
        )


def raise_first(findings: Sequence[Finding]) -> None:
    """The first error among ``findings`` as a ConstantsContractError."""
    for f in findings:
        if f.severity.value == "error":
            raise ConstantsContractError(
                f.message, code=f.code, constant=f.evidence.get("constant"), expected=f.expected, found=f.found, hint=f.hint
            )


def check_weight_kind(fqn: str, t: Any) -> None:
    """A weight must be a plain dense tensor without lazy flags (checked before its shape is read:
    a subclass may lie about it)."""
    import torch

    found = None
    if not isinstance(t, torch.Tensor):
        found = type(t).__name__
    elif type(t) not in plain_tensor_types(torch):
        found = f"a {type(t).__name__} (tensor subclass)"
    elif t.layout is not torch.strided or t.is_nested:
        found = "a nested tensor" if t.is_nested else f"a {str(t.layout).replace('torch.', '').lstrip('_')} tensor"
    elif t.is_neg() or t.is_conj():
        found = "a tensor with the conjugate bit" if t.is_conj() else "a tensor with the negative bit"
    if found is not None:
        raise ConstantsContractError(
            f"{fqn}: is {found}, not a plain dense tensor",
            code="constants.layout",
            constant=fqn,
            expected="a plain dense contiguous torch.Tensor",
            found=found,
            hint="pass a plain tensor (resolve views and flags with .contiguous(), .resolve_neg(), .resolve_conj(), .to_dense())",
        )


def _check_placement(fqn: str, t: Any, device: Any) -> None:
    """Device, contiguity and storage: what torch's copy of the tensor's bytes assumes."""
    if t.device.type != device.type or (device.index is not None and t.device.index != device.index):
        raise ConstantsContractError(
            f"{fqn}: is on {t.device}, the model runs on {device}",
            code="constants.device_mismatch",
            constant=fqn,
            expected=str(device),
            found=str(t.device),
            hint=f"move it with .to('{device}')",
        )
    if not t.is_contiguous():
        raise ConstantsContractError(
            f"{fqn}: strides {tuple(t.stride())} are not contiguous (a transposed or sliced view?); "
            "load_constants would read its memory in the compiled layout and the outputs would be wrong",
            code="constants.layout",
            constant=fqn,
            expected="contiguous",
            found=str(tuple(t.stride())),
            hint=f"pass tensors[{fqn!r}].contiguous()",
        )
    # torch copies the storage's size in bytes from the data pointer, then applies the storage
    # offset again (model_container.h, update_constant_buffer): a view into a larger storage
    # writes past the constant and the constant reads past its place
    need, storage = t.numel() * t.element_size(), t.untyped_storage().nbytes()
    if t.storage_offset() != 0 or storage != need:
        raise ConstantsContractError(
            f"{fqn}: is a view into a larger storage ({storage} bytes, the view starting at element {t.storage_offset()}, "
            f"its data {need} bytes); load_constants copies the whole storage from the view's start and would write "
            "past the constant (heap corruption, SIGSEGV)",
            code="constants.layout",
            constant=fqn,
            expected=f"a tensor that owns its storage ({need} bytes, offset 0)",
            found=f"{storage} bytes of storage, offset {t.storage_offset()}",
            hint=f"pass tensors[{fqn!r}].clone()",
        )


def _same_values(a: Any, b: Any) -> bool:
    """Two given tensors hold the same values (two names of one tied tensor): the same memory, or
    equal (compared only when dtype, shape and device agree)."""
    import torch

    if a is b:
        return True
    if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
        return False
    if a.data_ptr() == b.data_ptr() and a.stride() == b.stride():
        return True
    return bool(torch.equal(a, b))


def _holds_build_value(t: Any, spec: ConstantSpec) -> bool:
    """A given tensor of a constant compiled into the code holds the build's value (its bytes'
    SHA-256): then leaving it out changes nothing. The size is compared first: no hash of a
    tensor that cannot match."""
    from runtime_probe.formats.safetensors import tensor_bytes

    if t.numel() * t.element_size() != spec.nbytes or str(t.dtype).replace("torch.", "") != spec.dtype:
        return False
    try:
        return hashlib.sha256(tensor_bytes(t.detach().to("cpu"))).hexdigest() == spec.sha256
    except Exception:  # noqa: BLE001 - a tensor that cannot be read here (meta, no safetensors dtype): not the build's
        return False
