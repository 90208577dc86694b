"""The bulk read of a safetensors file, three ways: runtime_probe's reader (a bytearray per tensor,
filled by readinto after the strict header check), one copy per tensor out of a private mmap of
the same descriptor (tensors that own their memory, as runtime_probe's must), and the safetensors
library (mmap-backed tensors that do NOT own their memory: a later change to the file shows
through, and a truncation raises SIGBUS on first touch); and runtime_probe's ``borrow=True``, the
library after runtime_probe's strict header check (what the child uses for --weights, whose
tensors load_constants copies at once).

Each arm loads every tensor of one file (default 256 MB of float32) and then touches every byte
(a sum), since the library defers its reads to first use. Interleaved rounds; the median of each
arm and the ratios are printed side by side.

    python -m bench.safetensors_read [--mb 256] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime_probe.formats import safetensors as ours


def _mmap_copy(path: Path) -> dict[str, Any]:
    """One copy per tensor out of a private mapping, after the same header check."""
    import mmap

    import torch

    with ours._open(path) as f:
        header = ours._read_header_from(f, ours.DEFAULT_MAX_HEADER_BYTES)
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        out = {}
        for info in header.tensors.values():
            view = torch.frombuffer(mapped, dtype=torch.uint8, offset=header.data_start + info.begin, count=info.end - info.begin)
            out[info.name] = view.clone().view(getattr(torch, info.torch_dtype_name)).reshape(info.shape)
            del view
        return out


def _library(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path))


def _timed(load: Callable[[Path], dict[str, Any]], path: Path) -> float:
    started = time.perf_counter()
    for t in load(path).values():
        t.sum()
    return (time.perf_counter() - started) * 1000.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.safetensors_read", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--mb", type=int, default=256)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    import torch
    from safetensors.torch import save_file

    arms: dict[str, Callable[[Path], dict[str, Any]]] = {
        "runtime_probe": ours.load,
        "mmap + copy": _mmap_copy,
        "safetensors library": _library,
        "runtime_probe borrow": lambda path: ours.load(path, borrow=True),
    }
    with tempfile.TemporaryDirectory(prefix="st-bench-") as tmp:
        path = Path(tmp) / "w.safetensors"
        per = args.mb * 1024 * 1024 // 4 // 16
        save_file({f"w{i:02d}": torch.randn(per) for i in range(16)}, str(path))
        for load in arms.values():  # warm the page cache and the code
            _timed(load, path)
        times: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(args.rounds):
            for name, load in arms.items():
                times[name].append(_timed(load, path))
        size = os.path.getsize(path)
    med = {name: statistics.median(v) for name, v in times.items()}
    base = med["runtime_probe"]
    print(f"{size / 2**20:.0f} MiB, 16 tensors, {args.rounds} interleaved rounds, median ms (load + touch every byte)")
    print(f"{'arm':<22} {'median ms':>10} {'min ms':>8} {'speed vs runtime_probe':>23}")
    for name, values in times.items():
        print(f"{name:<22} {med[name]:>10.1f} {min(values):>8.1f} {base / med[name]:>22.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
