"""The kernel files a model's generated code loads, checked against the files its folder holds.

A GPU package's wrapper loads each Triton kernel at the model's first call, from
``cubin_dir / <file name of the build path>``, ``cubin_dir`` being the model's folder as torch's
package loader extracted it (``formats.wrapper_cpp.KernelLoad``). A package whose kernel file is
not there (renamed or removed, or the paths in its generated code rewritten after the build)
loads without a word and fails at its first call with ``CUDA driver error: file not found``, which
names no file (pytorch#120194). The wrapper.cpp says which file each kernel needs: read here,
before any native code, by the probe's archive phase, the guarded loader and ``inspect``.
"""

from __future__ import annotations

from runtime_probe.formats.wrapper_cpp import KernelLoad
from runtime_probe.package.archive import Archive
from runtime_probe.package.manifest import Manifest
from runtime_probe.package.wrapper import wrapper_facts
from runtime_probe.reporting.findings import Finding, error
from runtime_probe.runtime import layout

__all__ = ["kernel_file_finding", "kernel_file_findings", "missing_kernel_files", "model_folders"]

# what AOTInductor writes a kernel's binary as (CUDA cubin / fatbin / PTX, ROCm hsaco, XPU spv)
_KERNEL_SUFFIXES = (".cubin", ".fatbin", ".ptx", ".hsaco", ".spv")
_SHOWN = 5  # kernels and files named in a message; the evidence holds them all (up to _KEPT)
_KEPT = 200


def model_folders(manifest: Manifest | None) -> list[tuple[str, str]]:
    """(model name, folder in the archive) of each model a package's users load: the release
    model, and the debug twin where the manifest records one (stored outside torch's scan path,
    loaded from a package of its own whose model folder holds the same files)."""
    release = manifest.model_name if manifest is not None else layout.RELEASE_MODEL
    folders = [(release, layout.model_dir(release))]
    twin = manifest.twin if manifest is not None else None
    if twin is not None:
        folders.append((twin.model_name, twin.entry_prefix))
    return folders


def missing_kernel_files(archive: Archive, prefix: str) -> list[KernelLoad]:
    """The kernels the wrapper.cpp under ``prefix`` loads from a file that is not directly in that
    folder (the loader looks nowhere else). Empty when it has no wrapper.cpp, or loads no file."""
    facts = wrapper_facts(archive, prefix)
    if facts is None or not facts.kernel_loads:
        return []
    present = {e.rel[len(prefix) :] for e in archive.under(prefix)}
    return [k for k in facts.kernel_loads if not k.file or k.file not in present]


def kernel_file_findings(archive: Archive, manifest: Manifest | None, phase: str = "archive") -> list[Finding]:
    """``package.kernel_file_missing`` for each model folder (``model_folders``) that lacks a
    kernel file its generated code loads."""
    found = (kernel_file_finding(archive, name, prefix, phase) for name, prefix in model_folders(manifest))
    return [f for f in found if f is not None]


def kernel_file_finding(archive: Archive, model: str, prefix: str, phase: str = "archive") -> Finding | None:
    """The error for one model folder, naming each kernel and the file it looks for; None when
    every file is there."""
    missing = missing_kernel_files(archive, prefix)
    if not missing:
        return None
    by_file: dict[str, list[str]] = {}
    for load in missing:
        by_file.setdefault(load.file, []).append(load.kernel)
    wanted = "; ".join(_looks_for(kernels, file) for file, kernels in list(by_file.items())[:_SHOWN])
    if len(by_file) > _SHOWN:
        wanted += f"; and {len(by_file) - _SHOWN} more file(s)"
    held = sorted(e.rel[len(prefix) :] for e in archive.under(prefix) if _is_kernel_file(e.rel[len(prefix) :]))
    return error(
        "package.kernel_file_missing",
        phase,
        f"model {model!r} loads {len(missing)} kernel(s) from files its folder {prefix} does not hold: {wanted}. "
        "torch loads the package, and its first call fails with 'CUDA driver error: file not found', which names no file",
        expected=f"{_names([repr(f[:200]) for f in by_file])} in {prefix}",
        found=f"absent; the folder holds {_names(held, 'no kernel file')}",
        # what is known is only that the generated code opens a file the package lacks: the hint
        # names every way that comes about, not one guessed
        hint="the package lacks files its own generated code opens: a kernel file removed or renamed after the build, the kernel "
        "paths in its generated code rewritten, or a packaging step that left the files out; build it again, or repackage it "
        "with its kernel files; do not serve this file",
        evidence={
            "model": model,
            "folder": prefix,
            "missing": [{"kernel": k.kernel, "file": k.file} for k in missing[:_KEPT]],
            "kernel_files": held[:_KEPT],
        },
    )


def _looks_for(kernels: list[str], file: str) -> str:
    return f"{'kernel' if len(kernels) == 1 else 'kernels'} {_names(kernels)} {'looks' if len(kernels) == 1 else 'look'} for {file[:200]!r}"


def _is_kernel_file(rel: str) -> bool:
    return "/" not in rel and rel.endswith(_KERNEL_SUFFIXES)


def _names(names: list[str], none: str = "none") -> str:
    """The first few names, and how many more."""
    if not names:
        return none
    shown = ", ".join(n[:200] for n in names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
