"""A tiny package-shaped zip with a valid manifest and hashes, made without torch.

Enough for everything that runs before native code (archive checks, manifest rules, signatures,
signing): the .so is a few random bytes, which nothing here ever loads.
"""

from __future__ import annotations

import copy
import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime_probe import layout

from .test_manifest import minimal

ROOT = "model"
ENTRIES = {
    "archive_format": b"pt2",
    "data/aotinductor/model/abc.wrapper.so": b"\x7fELF" + bytes(range(256)) * 4,
    "data/aotinductor/model/abc.wrapper.cpp": b"// generated\n",
    layout.GOLDEN: b"golden bytes",
}


def manifest_dict(entries: dict[str, bytes]) -> dict[str, Any]:
    m = copy.deepcopy(minimal())
    m["hashes"] = {rel: hashlib.sha256(data).hexdigest() for rel, data in sorted(entries.items())}
    m["golden"]["entry"] = layout.GOLDEN
    m["golden"]["samples"] = [{"id": "example", "inputs": {"x": "s0.in.x"}, "outputs": {"output": "s0.out.output"}}]
    return m


def make_package(
    path: Path,
    *,
    entries: dict[str, bytes] | None = None,
    edit: Callable[[dict[str, Any]], Any] | None = None,
    manifest_bytes: bytes | None = None,
    extra: list[tuple[str, bytes]] | None = None,
) -> Path:
    """Write a package; ``edit`` may change the manifest dict (after hashing), ``manifest_bytes``
    replaces it outright, ``extra`` adds raw (root-relative) entries after the manifest."""
    entries = dict(ENTRIES if entries is None else entries)
    m = manifest_dict(entries)
    if edit is not None:
        edit(m)
    raw = manifest_bytes if manifest_bytes is not None else json.dumps(m, indent=1).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for rel, data in [*entries.items(), (layout.MANIFEST, raw), *(extra or [])]:
            zf.writestr(zipfile.ZipInfo(f"{ROOT}/{rel}", date_time=(1980, 1, 1, 0, 0, 0)), data)
    return path
