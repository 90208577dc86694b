"""Give a debug twin built without weights the release model's constants.

A twin compiled with ``aot_inductor.package_constants_in_so=False`` (``aoti-guard build``'s
default, ``--twin-weights``) holds no weights of its own: the package stores them once, in
the release model's .so. A twin run without them dereferences null constants and crashes, so
everything that loads such a twin (the build's twin check, the probe's escalation, the guarded
loader) calls ``share_release_constants`` before the first run.

The release .so is opened with torch's container runner (``AOTIModelContainerRunner*``), which
loads its constants and hands them out by their original names (``extract_constants_map``); the
twin copies them in (``load_constants(..., check_full_update=True)``: a twin asking for a
constant the release model lacks is an error, not a null pointer). The runner and the extracted
.so are gone when this returns. Imports torch: call it where torch may be imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from typing import Any

from runtime_probe.formats.safetensors import tensor_bytes
from runtime_probe.package.archive import open_archive
from runtime_probe.reporting.paths import name_in_folder, plain_name
from runtime_probe.runtime import layout
from runtime_probe.runtime.torch_compat import TorchCompatError, container_runner

__all__ = ["ReleaseConstantsError", "release_constant_digests", "release_so", "share_release_constants"]


class ReleaseConstantsError(RuntimeError):
    """The release model's constants could not be handed to the twin (the message says why)."""


def release_so(package_path: str, model_name: str, dest_dir: str) -> str:
    """Extract the release model's .so from the package into ``dest_dir``; returns its path."""
    archive, findings = open_archive(package_path)
    if archive is None:
        raise ReleaseConstantsError(f"the package cannot be read: {findings[0].message if findings else 'unknown'}")
    with archive:
        prefix = layout.model_dir(model_name)
        chosen = layout.model_library(sorted(e.rel for e in archive.under(prefix) if "/" not in e.rel[len(prefix) :]))
        if chosen is None:
            raise ReleaseConstantsError(f"the package has no release .so under {prefix}")
        path = name_in_folder(dest_dir, plain_name(os.path.basename(chosen), "model.so"))  # an entry's name, made plain
        with open(path, "wb") as out:
            for chunk in archive.iter_chunks(chosen):
                out.write(chunk)
    return path


def _runner(so_path: str, device_type: str, device_index: int | None) -> Any:
    try:
        return container_runner(so_path, device_type, device_index)
    except TorchCompatError as exc:
        raise ReleaseConstantsError(str(exc)) from None


@contextlib.contextmanager
def _release_constants(package_path: str, model_name: str, device_type: str, device_index: int | None) -> Iterator[dict[str, Any]]:
    """The release model's constants by their original names, read through torch's container
    runner from a copy of its .so; the copy is removed on the way out."""
    folder = tempfile.mkdtemp(prefix="runtime-probe-release-so-")
    try:
        so_path = release_so(package_path, model_name, folder)
        try:
            runner = _runner(so_path, device_type, device_index)
            constants = runner.extract_constants_map(False)
        except (RuntimeError, TypeError, AttributeError, OSError) as exc:
            raise ReleaseConstantsError(f"the release model's constants could not be read: {str(exc)[:300]}") from None
        # the runner stays alive while the caller reads: on CPU the tensors it hands out may be views
        # of the constants inside its .so, gone with it (the twin then copied garbage)
        yield constants
        del constants, runner
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def share_release_constants(twin: Any, package_path: str, model_name: str, device_type: str, device_index: int | None) -> dict[str, Any]:
    """Load the release model's constants (from ``package_path``) into ``twin`` (torch's
    ``AOTICompiledModel``). Returns ``{"seconds", "constants"}``; raises ReleaseConstantsError."""
    started = time.monotonic()
    with _release_constants(package_path, model_name, device_type, device_index) as constants:
        try:
            twin.load_constants(constants, check_full_update=True)
        except (RuntimeError, TypeError) as exc:
            raise ReleaseConstantsError(f"the twin did not take the release model's constants: {str(exc)[:300]}") from None
        count = len(constants)
        del constants  # the twin holds its own copies now
    return {"seconds": round(time.monotonic() - started, 4), "constants": count}


def release_constant_digests(
    package_path: str, model_name: str, names: Iterable[str], device_type: str, device_index: int | None
) -> dict[str, dict[str, Any]]:
    """``{name: {"sha256", "dtype", "shape", "nbytes"}}`` of the named constants as the release model holds
    them (the manifest's hash: the row-major little-endian bytes a safetensors file stores). The
    build uses it to pair a constant the compiler renamed with the program's (an attribute
    ``offset`` becomes ``_tensor_constant0``): by value, not by guess. Names the model lacks are left
    out. Raises ReleaseConstantsError."""
    wanted = set(names)
    out: dict[str, dict[str, Any]] = {}
    with _release_constants(package_path, model_name, device_type, device_index) as constants:
        for name, t in constants.items():
            if name in wanted:
                plain = t.detach().to("cpu")
                out[name] = {
                    "sha256": hashlib.sha256(tensor_bytes(plain)).hexdigest(),
                    "dtype": str(plain.dtype).replace("torch.", ""),
                    "shape": [int(n) for n in plain.shape],
                    "nbytes": int(plain.numel() * plain.element_size()),
                }
    return out
