"""Where torch's loader extracted a package, and removing what a dead child or a refused load left there.

torch's C++ loader extracts a package into a temporary folder, dlopens the model's .so from it,
and removes the folder when the model is destroyed: a child that crashes or is killed never
destroys it. On torch 2.13 and later the folder is ``$TMPDIR/aotinductor_XXXXXX``, and the probe
and the build give their children a TMPDIR inside their own temporary folder, which goes with it.
torch 2.11's loader ignores TMPDIR: it extracts to ``/tmp/XXXXXX`` (seen on the GPU machine,
docs/gpu-validation.md run 24; 2.12 not looked at), where a dead child's copy of the package
stayed. So a child names the folders its loaded models came from, read from its own memory map
(the .so is mapped from there, whatever the torch), and the worker removes those that outlive it.
A child that dies inside the load itself (the GPU machine's C++-runtime segfault comes at the .so's
dlopen, after the extraction) names nothing: its copy is found by what it holds, the same package's
model files in a folder the loader names (mkdtemp's six characters), made after the load began.
What a child says is not trusted: a package runs its own native code there, and could name any
folder. Only a folder the loader names, directly in /tmp or the child's TMPDIR, owned by this
user and not a link, is ever removed (``made_by_the_loader``).

The same happens in a serving process: a loader whose constructor throws (a custom op the process
never registered, a .so that does not load) has extracted the package, weights and all, and never
removes it, so a process that retries a refused load fills TMPDIR. ``remove_failed_load``, called
by runtime_probe.load when the loader refuses, removes that copy the same way.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable

__all__ = [
    "extraction_roots",
    "extractions_of",
    "in_use",
    "made_by_the_loader",
    "own_extraction_roots",
    "remove_failed_load",
    "remove_leftover_extractions",
]

# a package model's .so sits at <extraction>/<archive folder>/data/aotinductor/<model>/<name>.so,
# <extraction> being the folder the loader made: mkdtemp's six characters, after "aotinductor_"
# on 2.13+ (a package without an archive folder has its data/ right in <extraction>)
_MARKER = "/data/aotinductor/"
_MADE_BY_THE_LOADER = re.compile(r"(aotinductor_)?[A-Za-z0-9]{6}")


def extraction_roots(maps: str) -> list[str]:
    """The extraction folders of the package models mapped in a ``/proc/PID/maps`` text."""
    roots: set[str] = set()
    for line in maps.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        path = fields[5].removesuffix(" (deleted)")
        if path.startswith("/") and _MARKER in path:
            root = path.split(_MARKER, 1)[0]
            parent = os.path.dirname(root)
            roots.add(parent if _MADE_BY_THE_LOADER.fullmatch(os.path.basename(parent)) else root)
    return sorted(r for r in roots if r and r != "/")


def made_by_the_loader(path: str, temp_dirs: Iterable[str], since: float) -> bool:
    """``path`` is a folder the loader could have made: its name mkdtemp's, its parent one of
    ``temp_dirs`` (/tmp and the child's TMPDIR), a real folder (not a link) of this user, written
    since ``since`` (wall clock: the extraction fills it; an older folder is somebody else's)."""
    if not _MADE_BY_THE_LOADER.fullmatch(os.path.basename(path)):
        return False
    parents = {os.path.realpath(d) for d in temp_dirs if d}
    if os.path.realpath(os.path.dirname(path)) not in parents:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return os.path.isdir(path) and not os.path.islink(path) and st.st_uid == os.getuid() and st.st_mtime >= since - 1


def _holds_a_package(root: str) -> bool:
    """``root``/data/aotinductor, or that one folder down (the archive's own folder)."""
    if os.path.isdir(os.path.join(root, "data", "aotinductor")):
        return True
    try:
        return any(os.path.isdir(os.path.join(root, name, "data", "aotinductor")) for name in os.listdir(root))
    except OSError:
        return False


def own_extraction_roots() -> list[str]:
    """This process's extraction folders (none where /proc cannot be read)."""
    try:
        with open("/proc/self/maps") as fh:
            return extraction_roots(fh.read())
    except OSError:
        return []


def in_use(root: str, ignore_pid: int | None = None) -> bool:
    """Whether a running process maps a file from ``root`` (a model loaded from it) or holds one
    open (a loader still writing its extraction there). A loader between its last write and its
    dlopen does neither: on 2.11 (all loaders share /tmp) a child dying inside the load of the same
    package at that instant could remove that copy. Not seen; the window is that short."""
    prefix = root.rstrip("/") + "/"
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True  # cannot tell: keep it
    for pid in pids:
        if ignore_pid is not None and int(pid) == ignore_pid:
            continue
        try:
            with open(f"/proc/{pid}/maps") as fh:
                if prefix in fh.read():
                    return True
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                    return True
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return False


def _model_files(package: str) -> list[str]:
    """The package's model .so entries (``<archive folder>/data/aotinductor/<model>/<name>.so``),
    read through the probe's own bounded zip reader (unsafe names left out). Imported here: only a
    child that died inside a load needs it."""
    from runtime_probe.package.archive import open_archive
    from runtime_probe.reporting.errors import UsageError
    from runtime_probe.runtime import layout

    try:
        archive, _ = open_archive(package)
    except (UsageError, OSError):
        return []
    if archive is None:
        return []
    with archive:
        return [e.name for e in archive.entries.values() if e.rel.startswith(layout.AOTI_DIR) and e.rel.endswith(".so")]


def extractions_of(package: str, folders: Iterable[str], since: float) -> list[str]:
    """Folders the loader made in ``folders`` since ``since`` (wall clock) that hold ``package``'s
    model files: the copies a child that died while loading it left."""
    model_files = _model_files(package)
    if not model_files:
        return []
    found = []
    for folder in sorted({f for f in folders if f}):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if not made_by_the_loader(path, [folder], since):
                continue
            if any(os.path.isfile(os.path.join(path, entry)) for entry in model_files):
                found.append(path)
    return found


def remove_leftover_extractions(roots: Iterable[str], temp_dirs: Iterable[str], since: float, ignore_pid: int | None = None) -> list[str]:
    """Remove the extraction folders in ``roots`` that the loader made in ``temp_dirs`` since
    ``since`` (``made_by_the_loader``), still hold a package's model layout, and no running process
    maps or holds a file of; returns those removed."""
    temp_dirs = list(temp_dirs)
    removed = []
    for root in sorted(roots):
        if not made_by_the_loader(root, temp_dirs, since) or not _holds_a_package(root):
            continue  # already gone (the model was destroyed), or not an extraction
        if in_use(root, ignore_pid):
            continue
        shutil.rmtree(root, ignore_errors=True)
        if not os.path.exists(root):
            removed.append(root)
    return removed


def remove_failed_load(package: str, since: float) -> list[str]:
    """After torch's loader refused ``package`` in this process (its constructor threw): the copy
    it extracted since ``since`` into TMPDIR (or /tmp, torch 2.11), removed; returns those removed."""
    temp_dirs = [os.environ.get("TMPDIR") or "/tmp", "/tmp"]
    # this process still maps the refused .so (torch dlopened it and never closed it): a mapping
    # outlives its file, so only another process's use keeps the copy
    return remove_leftover_extractions(extractions_of(package, temp_dirs, since), temp_dirs, since, ignore_pid=os.getpid())
