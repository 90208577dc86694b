"""The generated wrapper.cpp of one model folder in a package, parsed (``formats.wrapper_cpp``).

Used for the release model (``data/aotinductor/model/``: a plain package's missing weights, its
checks) and for the debug twin (``aoti_guard/twin/``: whether its .so holds the weights).
"""

from __future__ import annotations

from runtime_probe.formats.wrapper_cpp import WrapperFacts, parse_wrapper_cpp
from runtime_probe.package.archive import READ_ERRORS, Archive

__all__ = ["MAX_WRAPPER_BYTES", "wrapper_facts"]

MAX_WRAPPER_BYTES = 256 * 1024 * 1024


def wrapper_facts(archive: Archive, prefix: str) -> WrapperFacts | None:
    """What the wrapper.cpp under ``prefix`` says (None when it is absent or unreadable)."""
    for e in archive.under(prefix):
        if e.rel.endswith(".wrapper.cpp"):
            try:
                return parse_wrapper_cpp(archive.read(e.rel, max_bytes=MAX_WRAPPER_BYTES).decode("utf-8", "replace"))
            except READ_ERRORS:
                continue
    return None
