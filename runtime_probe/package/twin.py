"""The debug twin: stored outside torch's scan path, loaded from a temporary package on demand."""

from __future__ import annotations

import os

from runtime_probe import layout
from runtime_probe.package.archive import Archive
from runtime_probe.package.manifest import Manifest

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
    path = os.path.join(dest_dir, f"{archive.root}.pt2")
    archive.extract_entries(pairs, path)
    return path


def twin_constants_from(package_path: str, manifest: Manifest) -> dict[str, str] | None:
    """What the child's ``load`` op takes as ``constants_from`` for this package's twin: the
    package and its release model when the twin has no weights of its own, else None."""
    twin = manifest.twin
    if twin is None or twin.weights != "release":
        return None
    return {"path": package_path, "model_name": manifest.model_name}
