"""A tiny package-shaped zip with a valid manifest and hashes, made without torch.

Enough for everything that runs before native code (archive checks, manifest rules, signatures,
signing): the .so is a few random bytes, which nothing here ever loads.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runtime_probe.runtime import layout

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


# RFC 8032's first Ed25519 test vector: a fixed key pair written as PEM without the cryptography
# package (the GPU image lacks it), for tests that need key FILES but never sign with them.
_RFC8032_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
_RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")


def _pem(label: str, der: bytes) -> bytes:
    import base64

    return f"-----BEGIN {label}-----\n{base64.b64encode(der).decode()}\n-----END {label}-----\n".encode()


def write_key_pair(private_path: Path) -> Path:
    """Write a fixed Ed25519 private key (PKCS#8 PEM) and its public key (SPKI PEM, at
    ``private_path.pub``); returns the public key's path."""
    private_path.write_bytes(_pem("PRIVATE KEY", bytes.fromhex("302e020100300506032b657004220420") + _RFC8032_SEED))
    private_path.chmod(0o600)
    public = private_path.with_name(private_path.name + ".pub")
    public.write_bytes(_pem("PUBLIC KEY", bytes.fromhex("302a300506032b6570032100") + _RFC8032_PUBLIC))
    return public


_WRITER = """
import os, shutil, sys
path, versions = sys.argv[1], sys.argv[2:]
n = 0
while True:
    tmp = f"{path}.tmp{n % 2}"
    shutil.copyfile(versions[n % len(versions)], tmp)
    os.replace(tmp, path)
    n += 1
"""


@contextlib.contextmanager
def replacing(path: Path, versions: list[Path]) -> Iterator[None]:
    """Another process replaces ``path`` atomically with each version in turn until the block
    ends (a process, not a thread: the GIL would let a reader finish between two writes)."""
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), *map(str, versions)])
    try:
        yield
    finally:
        writer.kill()
        writer.wait(10)
