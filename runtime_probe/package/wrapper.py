"""The generated wrapper.cpp of one model folder in a package, parsed (``formats.wrapper_cpp``).

Used for the release model (``data/aotinductor/model/``: a plain package's missing weights, its
checks) and for the debug twin (``aoti_guard/twin/``: whether its .so holds the weights).
"""

from __future__ import annotations

import weakref

from runtime_probe.formats.wrapper_cpp import WrapperFacts, parse_wrapper_cpp
from runtime_probe.package.archive import READ_ERRORS, Archive
from runtime_probe.runtime import layout
from runtime_probe.runtime.torch_compat import so_features

__all__ = ["MAX_WRAPPER_BYTES", "model_so_features", "wrapper_facts"]

MAX_WRAPPER_BYTES = 256 * 1024 * 1024


# each archive's parsed wrapper.cpp per folder: the probe reads the release model's in its archive
# (kernel files), host (ISA flags) and constants phases, and a wrapper is up to 256 MB of text
_PARSED: weakref.WeakKeyDictionary[Archive, dict[str, WrapperFacts | None]] = weakref.WeakKeyDictionary()


def wrapper_facts(archive: Archive, prefix: str) -> WrapperFacts | None:
    """What the wrapper.cpp under ``prefix`` says (None when it is absent or unreadable), parsed
    once per open archive."""
    parsed = _PARSED.setdefault(archive, {})
    if prefix not in parsed:
        parsed[prefix] = _read_wrapper_facts(archive, prefix)
    return parsed[prefix]


def _read_wrapper_facts(archive: Archive, prefix: str) -> WrapperFacts | None:
    for e in archive.under(prefix):
        if e.rel.endswith(".wrapper.cpp"):
            try:
                return parse_wrapper_cpp(archive.read(e.rel, max_bytes=MAX_WRAPPER_BYTES).decode("utf-8", "replace"))
            except READ_ERRORS:
                continue
    return None


def model_so_features(archive: Archive, prefix: str) -> dict[str, bool] | None:
    """What the model .so under ``prefix`` was compiled to support (``torch_compat.so_features``:
    the [AOTI_LOAD] log, ...); None when it has no .so or it cannot be read."""
    names = sorted(e.rel for e in archive.under(prefix) if "/" not in e.rel[len(prefix) :])
    chosen = layout.model_library(names)
    if chosen is None:
        return None
    try:
        return so_features(archive.iter_chunks(chosen))
    except READ_ERRORS:
        return None
