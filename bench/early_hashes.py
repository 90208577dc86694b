"""What hashing the release package's entries while validation runs saves the package phase
(``aoti_guard/pt2/writer.py``, ``EntryHashes``): a package with one entry of ``--mb`` MB (a
release .so holding its weights), a "validation" of ``--validate-s`` seconds (a sleep: on the GPU
validation waits on the device and the child), then the package phase's hashing, serial (all of
it after validation, as before) against early (the thread started when the package was written),
interleaved, side by side.

    python -m bench.early_hashes [--mb 1024] [--validate-s 5] [--rounds 3]

It measures the mechanism on this host's disk and CPU, not a GPU build: llama's 4.4 GB .so made
its package phase 13 s there (docs/zoo.md), and the phase now reports its parts (``detail.timings``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import zipfile

from aoti_guard.pt2.writer import EntryHashes, hash_entries
from bench._common import Sample, interleave, side_by_side, timed
from runtime_probe import layout

_CHUNK = 1 << 20


def _package(path: str, mb: int) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        info = zipfile.ZipInfo(f"pkg/{layout.model_dir(layout.RELEASE_MODEL)}m.wrapper.so")
        with zf.open(info, "w", force_zip64=True) as out:
            block = os.urandom(_CHUNK)
            for _ in range(mb):
                out.write(block)


def _serial(path: str, validate_s: float) -> Sample:
    time.sleep(validate_s)
    return timed(lambda: hash_entries(path))


def _early(path: str, validate_s: float) -> Sample:
    early = EntryHashes(path)
    time.sleep(validate_s)
    return timed(lambda: hash_entries(path, known=early.known(path)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.early_hashes", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=1024, help="the entry's size in MB (default 1024)")
    parser.add_argument("--validate-s", type=float, default=5.0, help="seconds of 'validation' before the package phase (default 5)")
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-early-hashes-") as folder:
        path = os.path.join(folder, "m.pt2")
        _package(path, ns.mb)
        hash_entries(path)  # the file in the page cache for both arms, as a package just written is
        arms = [
            ("serial (after validation)", lambda: _serial(path, ns.validate_s)),
            ("early (during validation)", lambda: _early(path, ns.validate_s)),
        ]
        results = interleave(arms, ns.rounds, warmup=0)
    title = f"package phase's hashing of a {ns.mb} MB entry after {ns.validate_s:g} s of validation, median of {ns.rounds}:"
    print(side_by_side(title, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
