"""Assembling the manifest and appending it, the golden samples and the twin to the package.

Runs last: the manifest records facts read off the compiled files themselves (the generated
source's constants and compile command, the .so's symbol versions, each cubin's arch) and the
hashes of every entry written before it. With a signing key, the manifest bytes are signed in
memory and the signature entry is appended together with the manifest.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from dataclasses import dataclass
from typing import Any

from aoti_guard.builder.compile import toolchain
from aoti_guard.builder.compile.aoti import SHARED_WEIGHTS_CONFIG, TWIN_CONFIGS
from aoti_guard.builder.compile.constant_digests import ConstantDigests
from aoti_guard.builder.compile.constant_names import program_tensors
from aoti_guard.builder.compile.targets import CPU_ISA_LEVELS
from aoti_guard.builder.export.contract import extract_constants
from aoti_guard.builder.golden import TOLERANCE_RULE
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.twin.schedule import weights as twin_weights
from aoti_guard.builder.validate.compare import manifest_table
from aoti_guard.builder.validate.run import Validation
from aoti_guard.pt2.signing import SignedManifest, SigningKey, sign_manifest
from aoti_guard.pt2.writer import EntryHashes, append_entries, copy_twin, hash_entries, zip_root
from runtime_probe._version import __version__
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.ladder.printer import BASELINE_VERSION as NONFINITE_BASELINE_VERSION
from runtime_probe.package.archive import open_archive
from runtime_probe.package.manifest import (
    MANIFEST_SCHEMA_VERSION,
    ConstantSpec,
    Golden,
    IOContract,
    Manifest,
    NonfiniteBaseline,
    TwinInfo,
    dump_manifest,
)
from runtime_probe.package.weights import carries_weights, configs_carry_weights
from runtime_probe.reporting.findings import Finding, warning
from runtime_probe.runtime import layout

__all__ = ["PackageJob", "assemble", "summary", "weightless_notes"]


def _isa_configs(options: BuildOptions) -> dict[str, object]:
    """The configs --cpu-isa added (recorded with the user's: the manifest says how it was built)."""
    if options.cpu_isa is None or not options.device.startswith("cpu"):
        return {}
    return dict(CPU_ISA_LEVELS.get(options.cpu_isa, {}))


def _toolchain_of(release_pt2: str, so_rel: str | None, wrapper: Any) -> Any:
    """The toolchain record, reading the release .so's ELF tables through a view of the stored
    entry: the .so holds the weights (4.4 GB for TinyLlama's shape), and only its headers and
    version tables are needed."""
    if so_rel is None:
        return toolchain.build_toolchain(wrapper, None)
    archive, _ = open_archive(release_pt2)
    if archive is None:
        return toolchain.build_toolchain(wrapper, None)
    with archive:
        view = archive.view(so_rel)
        try:
            return toolchain.build_toolchain(wrapper, view)
        finally:
            if isinstance(view, memoryview):
                view.release()


@dataclass(frozen=True)
class PackageJob:
    """What the package step assembles: the program and its contract, the release package written
    so far (and the twin's, when there is one), what validation found and stores, and the
    signer (None: unsigned). ``release_hashes``: the release package's entries hashed while the
    build went on (writer.py); ``constant_digests``: the program's constants hashed while the
    release model compiled."""

    ep: Any
    options: BuildOptions
    contract: IOContract
    release_pt2: str
    twin_pt2: str | None
    outcome: Validation
    signer: SigningKey | None = None
    release_hashes: EntryHashes | None = None
    constant_digests: ConstantDigests | None = None


@dataclass(frozen=True)
class _Release:
    """What the release model's own files say: its generated wrapper, .so, kernel images and
    AOTI's metadata."""

    wrapper: Any
    libraries: list[str]
    kernel_files: list[tuple[str, bytes]]
    aoti_meta: dict[str, str]


def assemble(job: PackageJob, timings: dict[str, float] | None = None) -> tuple[Manifest, SignedManifest | None]:
    """Append the golden samples, the twin and the manifest (and, with ``job.signer``, its
    signature). ``timings`` gets the seconds of each part (the package phase's detail: where its
    time goes).

    Raises:
        GuardError: signing failed; the manifest was not appended.
    """
    clock = _Parts(timings)
    root = zip_root(job.release_pt2)
    release = _read_release(job.release_pt2)
    clock.mark("read_release")
    target, tools = _target_and_toolchain(job, release)
    constants = _constants(job, release.wrapper)
    clock.mark("toolchain_and_constants")
    # waited for before anything is appended: the thread reads the zip's directory as it stands
    hashed: dict[str, str] = job.release_hashes.known(job.release_pt2) if job.release_hashes is not None else {}
    clock.mark("early_hashes_wait")
    kept = _kept_constants(job.ep, constants, job.options)
    if kept is not None:
        append_entries(job.release_pt2, [(layout.KEPT_CONSTANTS, kept)])
    golden = _append_golden(job)
    clock.mark("golden")
    twin = None
    if job.twin_pt2 is not None:
        hashed |= copy_twin(job.twin_pt2, job.release_pt2, layout.TWIN_MODEL, layout.TWIN_DIR)
        twin = _twin_info(job)
    clock.mark("twin")
    hashes = hash_entries(job.release_pt2, known=hashed)
    clock.mark("hashes")
    manifest = Manifest(
        schema_version=MANIFEST_SCHEMA_VERSION,
        tool={"name": "aoti-guard", "version": __version__},
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        root=root,
        model_name=layout.RELEASE_MODEL,
        io=job.contract,
        target=target,
        toolchain=tools,
        constants=tuple(constants),
        hashes=hashes,
        golden=golden,
        debug_twin=twin if twin is not None and twin.weights == "own" else None,
        debug_twin_without_weights=twin if twin is not None and twin.weights == "release" else None,
        inductor_configs={k: str(v) for k, v in {**_isa_configs(job.options), **job.options.inductor_configs}.items()},
        # the build check's atol/rtol once per output (golden.tolerances[].build_check), not on every row
        validation={
            "table": manifest_table(job.outcome.table) if golden is not None else job.outcome.table,
            "errors": sum(1 for f in job.outcome.findings if f.severity.value == "error"),
        },
        aoti_metadata=release.aoti_meta,
        kept_constants=layout.KEPT_CONSTANTS if kept is not None else None,
        user_code=job.outcome.user_code,
    )
    signed = _append_manifest(job, manifest)
    clock.mark("manifest")
    return manifest, signed


def _read_release(release_pt2: str) -> _Release:
    """The release model's wrapper source, .so names, kernel images and AOTI metadata."""
    import json
    import zipfile

    from runtime_probe.formats.wrapper_cpp import parse_wrapper_cpp

    wrapper_text, libraries = "", []
    kernel_files: list[tuple[str, bytes]] = []
    aoti_meta: dict[str, str] = {}
    with zipfile.ZipFile(release_pt2) as zf:
        for name in zf.namelist():
            rel = name.split("/", 1)[1]
            if not rel.startswith(layout.model_dir(layout.RELEASE_MODEL)):
                continue
            if rel.endswith(".wrapper.cpp"):
                wrapper_text = zf.read(name).decode("utf-8", "replace")
            elif rel.endswith(".so"):
                libraries.append(rel)
            elif rel.endswith((".cubin", ".fatbin")):
                kernel_files.append((rel, zf.read(name)))
            elif rel.endswith("_metadata.json") and not aoti_meta:
                try:
                    aoti_meta = {str(k): str(v) for k, v in json.loads(zf.read(name)).items()}
                except ValueError:
                    aoti_meta = {}
    return _Release(parse_wrapper_cpp(wrapper_text), libraries, kernel_files, aoti_meta)


def _target_and_toolchain(job: PackageJob, release: _Release) -> tuple[Any, Any]:
    """The manifest's target (device, ISA, kernel archs) and toolchain records."""
    options = job.options
    target = toolchain.build_target(options.device, release.wrapper, release.aoti_meta, toolchain.kernel_images(release.kernel_files))
    if options.cuda_archs and options.device.startswith("cuda"):
        # the list the build checked the kernels against: the probe's arch rule reads it
        target = dataclasses.replace(target, cuda_archs=tuple(options.cuda_archs))
    return target, _toolchain_of(job.release_pt2, layout.model_library(release.libraries), release.wrapper)


def _constants(job: PackageJob, wrapper: Any) -> list[ConstantSpec]:
    """The program's constants as the package keeps them (names paired in validation)."""
    names = job.outcome.constant_names
    digests = job.constant_digests
    return extract_constants(
        job.ep, wrapper.runtime_constants(), names.renamed, names.unpaired, None if digests is None else digests.digest
    )


def _append_golden(job: PackageJob) -> Golden | None:
    """The golden samples appended, and their manifest record (None: validation stored none)."""
    outcome = job.outcome
    if outcome.golden_bytes is None:
        return None
    append_entries(job.release_pt2, [(layout.GOLDEN, outcome.golden_bytes)])
    return Golden(
        layout.GOLDEN,
        tuple(outcome.index),
        tuple(outcome.tolerances),
        len(outcome.golden_bytes),
        job.options.golden_max_bytes,
        TOLERANCE_RULE,
        tuple(f"{r['sample']}: {r['why']}" for r in outcome.storage if r.get("stored") == "dropped"),
        tuple(outcome.compact) or None,
        allow_nonfinite=job.options.allow_nonfinite,  # the probe judges NaN/Inf by the same rule (golden/sample_rule.py)
    )


def _twin_info(job: PackageJob) -> TwinInfo:
    """The twin's manifest record: its configs, kernels, weights and the non-finite baseline."""
    weights = twin_weights(job.options.twin_weights, job.options.device)
    configs = {**TWIN_CONFIGS, **({SHARED_WEIGHTS_CONFIG: False} if weights == "release" else {})}
    info = job.outcome.twin_info or {}
    recorded = info.get("nonfinite")
    baseline = (
        NonfiniteBaseline(
            NONFINITE_BASELINE_VERSION,
            tuple(recorded["samples"]),
            {name: tuple(kinds) for name, kinds in recorded["names"].items()},
        )
        if recorded
        else None
    )
    return TwinInfo(
        layout.TWIN_MODEL,
        layout.TWIN_DIR,
        bool(TWIN_CONFIGS["nan_asserts"]),
        str(TWIN_CONFIGS["aot_inductor.debug_intermediate_value_printer"]),
        {k: str(v) for k, v in configs.items()},
        tuple(info.get("kernels", [])),
        weights,
        baseline,
    )


def _append_manifest(job: PackageJob, manifest: Manifest) -> SignedManifest | None:
    """The manifest appended, with its signature entry when there is a signer (signed in memory)."""
    manifest_bytes = dump_manifest(manifest)
    entries = [(layout.MANIFEST, manifest_bytes)]
    signed = None
    if job.signer is not None:
        signed = sign_manifest(manifest_bytes, job.signer)
        entries.append((layout.SIGNATURE, signed.entry))
    append_entries(job.release_pt2, entries)
    return signed


def _kept_constants(ep: Any, constants: list[ConstantSpec], options: BuildOptions) -> bytes | None:
    """A package without weights: the values of its runtime constants that no checkpoint holds
    (non-persistent buffers, lifted tensor constants), as safetensors bytes under the names
    ``load_constants`` takes, so that a state_dict() or save_pretrained file completes it. None
    for a package with weights (its .so keeps them) or without such constants."""
    if configs_carry_weights(options.inductor_configs):
        return None
    tensors = program_tensors(ep)
    kept = {c.loaded_name: tensors[c.fqn] for c in constants if c.storage == "package" and c.in_state_dict is False and c.fqn in tensors}
    if not kept:
        return None
    return _safetensors.dumps({name: t.detach().to("cpu").contiguous() for name, t in kept.items()})


class _Parts:
    """Seconds per part of the package phase, each since the previous ``mark`` (into ``into``)."""

    def __init__(self, into: dict[str, float] | None) -> None:
        self.into = into
        self.last = time.perf_counter()

    def mark(self, part: str) -> None:
        now = time.perf_counter()
        if self.into is not None:
            self.into[part] = round(now - self.last, 3)
        self.last = now


def summary(manifest: Manifest) -> dict[str, Any]:
    return {
        "inputs": [i.name for i in manifest.io.inputs],
        "outputs": [o.name for o in manifest.io.outputs],
        "symbols": {s.name: [s.min, s.max] for s in manifest.io.symbols},
        "constants": len(manifest.constants),
        "golden_samples": [g.id for g in manifest.golden.samples] if manifest.golden else [],
        "golden_compact": [g.id for g in manifest.golden.compact_samples or ()] if manifest.golden else [],
        "debug_twin": manifest.twin is not None,
        "twin_weights": manifest.twin.weights if manifest.twin is not None else None,
        "kernel_archs": list(manifest.target.kernel_archs),
        "cpu_isa": list(manifest.target.cpu_isa),
    }


def weightless_notes(manifest: Manifest) -> list[Finding]:
    """A package built without its weights (package_constants_in_so=False) is a package that a
    bare AOTI load runs on unset memory: the build says so, and how to give the weights."""
    if carries_weights(manifest):
        return []
    constants = manifest.package_constants()
    kept = [c.loaded_name for c in constants if c.in_state_dict is False and manifest.kept_constants is not None]
    also = f" ({len(kept)} that no state_dict() holds are kept in the package: {', '.join(kept[:4])}{' ...' if len(kept) > 4 else ''})"
    given = len(constants) - len(kept)
    return [
        warning(
            "build.no_packaged_weights",
            "package",
            f"the package carries no weights (built with aot_inductor.package_constants_in_so=False): {given} constant(s) "
            f"must be given at load{also if kept else ''}; a bare AOTI load that calls it first reads unset memory (SIGSEGV)",
            expected="the weights in the package's .so",
            found=f"{given} constant(s) without values",
            hint="give them at load: aoti-guard probe PKG --weights FILE.safetensors, or runtime_probe.load(PKG, weights=FILE "
            "or a {name: tensor} map) (a state_dict() or save_pretrained safetensors file as it is); "
            "build without package_constants_in_so=False to ship them inside",
        )
    ]
