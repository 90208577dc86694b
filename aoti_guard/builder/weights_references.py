"""``aoti-guard references``: a package with golden references for new weights, same compiled code.

A release engineer rotating a checkpoint ships the same compiled package and loads the new weights
at run time (``probe --weights``, ``runtime_probe.load(..., weights=)``). The probe can then only
check the outputs for NaN/Inf: its references are the build's eager outputs with the build's
weights. This makes references for the new weights on the build side, with the factory's eager
model (validate/new_references.py), and writes OUT: every entry of PACKAGE as it is (the release
model, its .so with the build's weights in it, the twin), a new golden file, and a manifest whose
constants' digests are the new weights' and whose ``golden.references`` says where the references
came from. ``probe OUT --weights NEW`` then compares the outputs with them; ``probe OUT`` alone
runs the .so's own weights and says they were not compared (``constants.references_need_weights``).

OUT is unsigned (a signature covers one manifest, and this is a new one): ``aoti-guard sign OUT
--key KEY`` signs it. Steps, in order, each refusing before anything is written: the package
(archive and trust checks), the weights file against its constants, the factory (its device: the
package's), the weights into the model, the golden inputs, eager, then OUT (written under a
temporary name, verified like a signed package, then moved into place).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aoti_guard.builder.resolve import device as device_mod
from aoti_guard.builder.resolve import training_mode
from aoti_guard.builder.resolve.target import FactoryError, resolve_target
from aoti_guard.builder.validate import new_references as refs
from aoti_guard.pt2.writer import replace_entries, sha256_bytes
from runtime_probe._version import __version__
from runtime_probe.package.archive import open_archive
from runtime_probe.package.manifest import Manifest, References, dump_manifest
from runtime_probe.reporting.errors import PackageRejected, ToolError, UsageError
from runtime_probe.reporting.findings import has_errors
from runtime_probe.reporting.paths import Paths, Read, Write
from runtime_probe.runtime import layout
from runtime_probe.trust.check import check_archive
from runtime_probe.trust.signature import read_signature

__all__ = ["ReferencesRequest", "ReferencesResult", "make_references"]


@dataclass(frozen=True)
class ReferencesRequest:
    package: str  # the package built from the factory (PACKAGE)
    target: str  # the factory it was built from (TARGET: file.py:func, module:func, a saved program)
    weights: str  # the new weights (a safetensors state_dict() or save_pretrained file)
    output: str  # where the new package goes (-o)


@dataclass(frozen=True)
class ReferencesResult:
    path: str
    samples: tuple[str, ...]  # the golden samples whose references were made again
    constants: int  # package constants the weights replace
    device: str  # where eager ran (the package's device)
    signed_by: str | None  # PACKAGE's signer, whose signature OUT does not carry
    references: References


def paths(req: ReferencesRequest) -> Paths:
    """What the command reads and writes, for the one path rule (OUT is never PACKAGE or NEW)."""
    from aoti_guard.builder.outputs import target_file

    reads = [Read("the package", req.package), Read("the --weights file", req.weights)]
    target = target_file(req.target)
    if target is not None:
        reads.append(Read("the build target", target))
    return Paths(tuple(reads), (Write("-o", req.output),))


def make_references(req: ReferencesRequest, note: Callable[[str], None] = lambda _: None) -> ReferencesResult:
    """Make the new package (module docstring). ``note`` hears each step as it starts.

    Raises:
        UsageError: a path, the weights, the factory or its model do not fit the package (named).
        PackageRejected: PACKAGE fails its own archive checks, or has no golden samples.
        ToolError: OUT could not be written, or did not verify.
    """
    paths(req).check()
    note("reading the package")
    m, manifest_bytes, signed_by, golden = _read_package(req.package)
    note("checking the weights against the package's constants")
    check = refs.check_new_weights(m, req.weights)
    note("running the factory")
    fn, device = _factory_model(req.target, m)
    digests = refs.load_weights(fn, m, req.weights, check)
    with tempfile.TemporaryDirectory(prefix="aoti-guard-references-") as work:
        golden_path = os.path.join(work, "golden.safetensors")
        with open(golden_path, "wb") as fh:
            fh.write(golden)
        inputs = refs.golden_inputs(m, golden_path)
    note(f"eager on {len(inputs.leaves)} golden sample(s) on {device}")
    new = refs.references(fn, m, inputs, device)
    made = References(
        weights=os.path.basename(req.weights),
        model=_label(req.target),
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        tool=f"aoti-guard {__version__}",
        base_manifest_sha256=hashlib.sha256(manifest_bytes).hexdigest(),
        base_created=m.created,
    )
    out = _new_manifest(m, digests, refs.golden_record(m, new), made, sha256_bytes(new.data))
    note(f"writing {req.output}")
    _write(req.package, req.output, (m.golden.entry if m.golden is not None else layout.GOLDEN, new.data), dump_manifest(out))
    return ReferencesResult(req.output, tuple(inputs.leaves), len(digests), device, signed_by, made)


def _read_package(path: str) -> tuple[Manifest, bytes, str | None, bytes]:
    """(manifest, its bytes, the signer's key id, the golden file) of a package that passes its own checks."""
    archive, findings = open_archive(path)  # UsageError for a missing file
    if archive is None:
        raise PackageRejected(f"{path} is not a usable package", findings)
    with archive:
        trust = check_archive(archive)
        problems = [*findings, *trust.findings]
        if has_errors(problems) or trust.manifest is None:
            raise PackageRejected(
                f"{path} fails its own archive checks, or has no aoti-guard manifest", problems, hint="use a package aoti-guard build wrote"
            )
        m = trust.manifest
        if m.golden is None:
            raise PackageRejected(f"{path} has no golden samples to make references for", problems, hint="build it with golden samples")
        manifest_bytes = archive.read(layout.MANIFEST, max_bytes=archive.entries[layout.MANIFEST].size)
        golden = archive.read(m.golden.entry, max_bytes=archive.entries[m.golden.entry].size)
        signed_by = None
        if archive.has(layout.SIGNATURE):
            try:
                signed_by = read_signature(archive).key_id
            except ValueError:
                signed_by = "an unreadable signature"
    return m, manifest_bytes, signed_by, golden


def _factory_model(target: str, m: Manifest) -> tuple[Any, str]:
    """The factory's eager model on the package's device, in eval mode, and that device.

    Raises:
        UsageError: the factory raised, its model is in training mode, or the device is not here.
    """
    import torch

    try:
        spec = resolve_target(target)
    except FactoryError as exc:
        raise UsageError(f"{exc}: " + "; ".join(exc.detail[:4]), hint=exc.hint) from None
    in_training = training_mode.training_dependent(spec.model)
    if in_training:
        raise UsageError(training_mode.message(in_training), hint="call model.eval() in the factory before returning the model")
    # eager runs where the package's references were made: the device the package was compiled for
    choice = device_mod.resolve_device(spec, m.target.device_type)
    model = choice.spec.model
    return (model.module() if isinstance(model, torch.export.ExportedProgram) else model), choice.device


def _label(target: str) -> str:
    """The factory for the record: its function and its file's name, never a folder of this machine."""
    module, sep, func = target.rpartition(":")
    if not sep:
        return os.path.basename(target)
    return f"{func} ({os.path.basename(module) if module.endswith('.py') or os.sep in module else module})"


def _new_manifest(m: Manifest, digests: dict[str, str], golden: Any, made: References, golden_sha: str) -> Manifest:
    from runtime_probe.package.manifest import MANIFEST_SCHEMA_VERSION

    constants = tuple(dataclasses.replace(c, sha256=digests[c.fqn]) if c.fqn in digests else c for c in m.constants)
    return dataclasses.replace(
        m,
        schema_version=MANIFEST_SCHEMA_VERSION,
        tool={"name": "aoti-guard", "version": __version__},
        constants=constants,
        golden=dataclasses.replace(golden, references=made),
        hashes={**m.hashes, m.golden.entry if m.golden is not None else layout.GOLDEN: golden_sha},
    )


def _write(src: str, dst: str, golden: tuple[str, bytes], manifest: bytes) -> None:
    """OUT under a temporary name beside it, checked as the probe will check it, then moved."""
    folder = os.path.dirname(os.path.abspath(dst))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".aoti-guard-references-", suffix=".pt2", dir=folder)
    except OSError as exc:
        raise UsageError(f"cannot write {dst}: {exc.strerror}", hint="give -o a path in a writable folder") from None
    os.close(fd)
    try:
        replace_entries(src, tmp, [golden, (layout.MANIFEST, manifest)], drop=(layout.SIGNATURE,))
        archive, findings = open_archive(tmp)
        if archive is None:
            raise ToolError("the package written is not a readable archive (a bug in aoti-guard)")
        with archive:
            trust = check_archive(archive)
        bad = [f for f in (*findings, *trust.findings) if f.severity.value == "error"]
        if bad:
            raise ToolError(f"the package written does not verify: {bad[0].code}: {bad[0].message} (a bug in aoti-guard)")
        os.replace(tmp, dst)
    except OSError as exc:
        raise ToolError(f"writing {dst} failed: {exc.strerror or exc}", hint="check free disk space and permissions") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
