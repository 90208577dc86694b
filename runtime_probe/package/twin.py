"""The debug twin: stored outside torch's scan path, loaded from a temporary package on demand."""

from __future__ import annotations

from runtime_probe.package.archive import Archive
from runtime_probe.package.manifest import Manifest
from runtime_probe.reporting.paths import name_in_folder, plain_name
from runtime_probe.runtime import layout

__all__ = ["materialize_twin", "twin_constants_from"]


def materialize_twin(archive: Archive, manifest: Manifest, dest_dir: str) -> str | None:
    """Write a loadable .pt2 holding only the twin (model name ``manifest.twin.model_name``)
    into ``dest_dir``; returns its path, or None when the package has no twin."""
    twin = manifest.twin
    if twin is None:
        return None
    prefix = twin.entry_prefix
    pairs = [(e.rel, layout.model_dir(twin.model_name) + e.rel[len(prefix) :]) for e in archive.under(prefix)]
    if not pairs:
        return None
    # the archive's root folder names the file (torch's loader reads the root inside the zip, not the name)
    path = name_in_folder(dest_dir, plain_name(archive.root, "twin"), suffix=".pt2")
    archive.extract_entries(pairs, path)
    return path


def twin_constants_from(package_path: str, manifest: Manifest) -> dict[str, str] | None:
    """What the child's ``load`` op takes as ``constants_from`` for this package's twin: the
    package and its release model when the twin has no weights of its own, else None."""
    twin = manifest.twin
    if twin is None or twin.weights != "release":
        return None
    return {"path": package_path, "model_name": manifest.model_name}
