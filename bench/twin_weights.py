"""What the debug twin's own copy of the weights costs: ``aoti-guard build`` of one zoo model with
``--twin-weights own`` against ``--twin-weights shared`` (the twin takes the release model's
constants at run time), interleaved, side by side: the package's bytes, the twin's .so, the
build's wall time and its ``debug_twin`` and ``package`` phases, and own / shared ratios.

    python -m bench.twin_weights [--model resnet18] [--size full] [--device cpu] [--rounds 2]

On the GPU machine add ``--device cuda`` (shared is the default there too since issue 26: aoti_guard/builder/twin.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ARMS = ("own", "shared")


def _build(model: str, size: str, device: str, weights: str, folder: Path) -> dict[str, Any]:
    out = folder / f"{model}-{weights}.pt2"
    report = folder / f"{model}-{weights}.json"
    env = {**os.environ, "AOTI_GUARD_ZOO_SIZE": size, "AOTI_GUARD_ZOO_DEVICE": device}
    cmd = [sys.executable, "-m", "aoti_guard", "build", f"zoo/models.py:{model}", "-o", str(out), "--json", str(report)]
    cmd += ["--device", device, "--twin-weights", weights, "-q"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"build with --twin-weights {weights} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    phases = {p["name"]: p["seconds"] for p in json.loads(report.read_text())["phases"]}
    with zipfile.ZipFile(out) as zf:
        twin_so = sum(i.file_size for i in zf.infolist() if "/aoti_guard/twin/" in i.filename and i.filename.endswith(".so"))
    row = {
        "package_mb": out.stat().st_size / 1e6,
        "twin_so_mb": twin_so / 1e6,
        "build_s": seconds,
        "debug_twin_s": phases.get("debug_twin", 0.0),
        "package_s": phases.get("package", 0.0),
    }
    out.unlink()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18", help="a zoo model (zoo/models.py)")
    parser.add_argument("--size", default="full", choices=("small", "full"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=2, help="builds per arm, interleaved (own, shared, own, ...)")
    args = parser.parse_args(argv)
    rows: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory(prefix="bench-twin-weights-", dir=".") as tmp:
        for i in range(args.rounds):
            for arm in ARMS:
                rows[arm].append(_build(args.model, args.size, args.device, arm, Path(tmp)))
                print(f"round {i + 1}/{args.rounds} {arm}: {json.dumps({k: round(v, 2) for k, v in rows[arm][-1].items()})}", flush=True)
    keys = ("package_mb", "twin_so_mb", "build_s", "debug_twin_s", "package_s")
    med = {arm: {k: statistics.median(r[k] for r in rows[arm]) for k in keys} for arm in ARMS}
    print(f"\n{args.model} ({args.size}, {args.device}), median of {args.rounds} build(s) per arm:\n")
    print("| measure | own | shared | own / shared |")
    print("| --- | ---: | ---: | ---: |")
    for k in keys:
        own, shared = med["own"][k], med["shared"][k]
        ratio = f"{own / shared:.2f}" if shared > 0 else "-"
        print(f"| {k} | {own:.2f} | {shared:.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
