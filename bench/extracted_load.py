"""Issue 27: does loading from an already-extracted package folder (torch >= 2.13's
AOTIModelPackageLoader takes one) make our loaders' cold start faster?

Our loaders (the probe's child, runtime_probe.load) load from a private copy of the package (the
bytes verified are the bytes loaded: package/private_copy.py), and torch's loader then extracts
the model folder from that zip into its own temporary folder. Loading a folder could replace the
copy plus torch's extraction by one extraction of our own. Arms, each a fresh process, the
package's pages warm (read once before), interleaved:

- ``zip``: private copy of the .pt2, then AOTIModelPackageLoader(copy): today's path;
- ``dir``: the model's entries extracted from the .pt2 into a private folder (what would replace
  the copy), then AOTIModelPackageLoader(folder);
- ``zip, no copy``: AOTIModelPackageLoader(original .pt2): torch alone, the floor.

Each prints its steps; the table shows medians and the ratios to ``zip`` side by side.

    python -m bench.extracted_load [--package PKG] [--mib 256] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

ARMS = ("zip", "dir", "zip, no copy")


def _child(mode: str, package: str, work: str) -> None:
    import torch  # noqa: F401 - imported before the clock starts: common to all arms

    from runtime_probe import torch_compat
    from runtime_probe.package.private_copy import private_copy

    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    if mode == "zip":
        path = private_copy(package, os.path.join(work, "copy"))
        steps["copy"] = time.perf_counter() - t0
    elif mode == "dir":
        with zipfile.ZipFile(package) as zf:
            root = zf.namelist()[0].split("/", 1)[0]
            zf.extractall(os.path.join(work, "x"), [n for n in zf.namelist() if "/data/aotinductor/" in n or n.count("/") <= 1])
        path = os.path.join(work, "x", root)
        steps["extract"] = time.perf_counter() - t0
    else:
        path = package
    t1 = time.perf_counter()
    torch_compat.make_package_loader(path, "model", None)
    steps["load"] = time.perf_counter() - t1
    steps["total"] = time.perf_counter() - t0
    print(json.dumps(steps))


def _make_package(out_dir: str, mib: int) -> str:
    import torch

    width = 2048
    layers = max(1, mib * 1024 * 1024 // (width * width * 4))
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)]).eval()
    ep = torch.export.export(model, (torch.randn(2, width),))
    path = os.path.join(out_dir, f"linear_{mib}mib.pt2")
    from runtime_probe import torch_compat

    torch_compat.aoti_compile_and_package()(ep, package_path=path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package")
    parser.add_argument("--mib", type=int, default=256, help="weights of the generated package (without --package)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    from runtime_probe import torch_compat

    if not torch_compat.features()["loader_accepts_directory"]:
        print(f"torch {torch_compat.torch_version()}: the loader takes no folder; nothing to compare")
        return 1
    tmp = tempfile.mkdtemp(prefix="bench-extracted-")
    try:
        package = args.package or _make_package(tmp, args.mib)
        with open(package, "rb") as fh:  # warm: every arm reads a cached file
            while fh.read(1 << 24):
                pass
        runs: dict[str, list[dict[str, float]]] = {a: [] for a in ARMS}
        for r in range(args.rounds):
            for arm in ARMS[r % len(ARMS) :] + ARMS[: r % len(ARMS)]:  # order rotates each round
                work = tempfile.mkdtemp(dir=tmp)
                out = subprocess.run(
                    [sys.executable, "-m", "bench.extracted_load", "--child", arm, package, work],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "TMPDIR": work},
                )
                runs[arm].append(json.loads(out.stdout.strip().splitlines()[-1]))
                shutil.rmtree(work, ignore_errors=True)
        size = os.path.getsize(package) / 2**20
        print(f"torch {torch_compat.torch_version()}, package {size:.0f} MiB, {args.rounds} rounds, medians (s)")
        base = statistics.median(r["total"] for r in runs["zip"])
        print("| arm | copy/extract | load | total | total / zip |")
        print("|---|---|---|---|---|")
        for arm in ARMS:
            prep = [r.get("copy", r.get("extract", 0.0)) for r in runs[arm]]
            total = statistics.median(r["total"] for r in runs[arm])
            load = statistics.median(r["load"] for r in runs[arm])
            print(f"| {arm} | {statistics.median(prep):.3f} | {load:.3f} | {total:.3f} | {total / base:.2f}x |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
