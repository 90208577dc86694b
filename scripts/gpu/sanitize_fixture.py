"""Make a package built on the GPU machine fit to commit as a test fixture.

Usage: python scripts/gpu/sanitize_fixture.py IN.pt2 OUT.pt2

Build paths of that machine appear in the generated source, the .so's strings, the cubins' debug
line tables and the manifest's compiler path. Each is overwritten in place by a placeholder of the
same length (so binaries keep their layout), and the manifest's entry hashes are recomputed:
the result is the same package, minus where it was built. A kernel file's own name (``*.cubin``,
``*.fatbin``) is kept: the generated code opens that name in the package's model folder, and
tests/data/cuda_example.pt2, made before this rule, lost its names and fails on every GPU with
"CUDA driver error: file not found" (GPU run 34; the probe names it: package.kernel_file_missing).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile

PATH = re.compile(rb"/(?:opt|tmp|root|home|work|usr/local)/[\w.+-]+(?:/[\w.+-]*)*")


KERNEL_FILE = re.compile(rb"/[\w.+-]+\.(?:cubin|fatbin)$")


def _blank(path: bytes) -> bytes:
    kept = KERNEL_FILE.search(path)
    head = path[: kept.start()] if kept else path
    return b"/" + b"_" * (len(head) - 1) + (kept.group(0) if kept else b"")


def scrub(data: bytes) -> bytes:
    return PATH.sub(lambda m: _blank(m.group(0)), data)


def main(src: str, dst: str) -> None:
    with zipfile.ZipFile(src) as zin:
        infos = zin.infolist()
        entries = {i.filename: scrub(zin.read(i)) for i in infos}
    root = infos[0].filename.split("/", 1)[0]
    manifest_name = f"{root}/extra/aoti_guard/manifest.json"
    manifest = json.loads(entries[manifest_name])
    manifest["hashes"] = {
        name.split("/", 1)[1]: hashlib.sha256(data).hexdigest() for name, data in entries.items() if name != manifest_name
    }
    entries[manifest_name] = (json.dumps(manifest, indent=1) + "\n").encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in infos:
            out = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            zout.writestr(out, entries[info.filename])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
