"""Issue 14: the cold start of a serving process, each arm a fresh process, side by side.

Arms (each ``python bench/_cold_child.py MODE PKG DEVICE``, timed as a whole process and by step):

- ``import torch``: the floor under everything;
- ``torch aoti_load_package``: torch's own loader + the first call;
- ``torch aoti_load_package, TORCHINDUCTOR_VEC_ISA_OK=0``: the same with the load-time ISA probe off
  (the setting docs/benchmarks.md discusses for plain-torch users);
- ``direct AOTIModelPackageLoader``: the C++ loader constructed directly in torch's
  ``AOTICompiledModel`` + the first call (dlopen, constants to the device, one call; that
  wrapper's module imports Inductor, which runtime_probe.load no longer does);
- ``runtime_probe.load``: the guarded loader (hashes verified) + the first call;
- ``runtime_probe.load verify=False``: without reading the whole file for its hashes;
- ``python -m runtime_probe --fast``: the serving pre-flight as a whole process (archive, host,
  load in a child, one golden sample); issue 14's goal is <= 1.2x the direct loader's process.

Each process gets a fresh, empty ``TORCHINDUCTOR_CACHE_DIR`` (a new container's state) unless
``--warm-cache``. Arms run interleaved, their order rotating each round.

    python -m bench.cold_start [--package PKG] [--device cuda] [--rounds N | --quick] [--warm-cache] [--json PATH]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from bench._common import (
    ROOT,
    Sample,
    add_package_arg,
    base_parser,
    child_env,
    interleave,
    load_snapshot,
    log,
    machine,
    md_table,
    package_or_example,
    publish,
    rounds_of,
    run_timed,
    wait_for_quiet,
)

ARMS = [
    ("import torch", "import", {}),
    ("torch aoti_load_package", "torch", {}),
    ("torch aoti_load_package, TORCHINDUCTOR_VEC_ISA_OK=0", "torch", {"TORCHINDUCTOR_VEC_ISA_OK": "0"}),
    ("direct AOTIModelPackageLoader", "direct", {}),
    ("runtime_probe.load", "guard", {}),
    ("runtime_probe.load verify=False", "guard-noverify", {}),
    ("python -m runtime_probe --fast", "preflight", {}),
]
FLOOR = "direct AOTIModelPackageLoader"


def _arm(mode: str, env: dict[str, str], pkg: str, device: str, tmp: str, warm: bool) -> Callable[[], Sample]:
    def run() -> Sample:
        cache = os.path.join(tmp, "warm-cache") if warm else tempfile.mkdtemp(prefix="inductor-cache-", dir=tmp)
        full = {**child_env(), **env, "TORCHINDUCTOR_CACHE_DIR": cache}
        if mode == "preflight":
            # a whole pre-flight process: no step breakdown, its wall time is the figure
            command = [sys.executable, "-m", "runtime_probe", "--fast", "-q", "--device", device, pkg]
            sample = run_timed(command, env=full, cwd=ROOT)  # raises if the pre-flight fails
            sample.extra = {"steps": {}}
        else:
            sample = run_timed([sys.executable, str(ROOT / "bench" / "_cold_child.py"), mode, pkg, device], env=full, cwd=ROOT)
            line = next(ln for ln in sample.extra["stdout"].splitlines() if ln.startswith("{"))
            sample.extra = {"steps": json.loads(line)["steps"]}
        if not warm:
            shutil.rmtree(cache, ignore_errors=True)
        return sample

    return run


def render(data: dict[str, Any]) -> str:
    arms = data["arms"]
    floor = arms[FLOOR]["wall"]
    # torch's own loader is the second reference when it ran (--arms may leave it out)
    torch_wall = arms.get("torch aoti_load_package", {}).get("wall")
    steps = sorted({k for a in arms.values() for k in a["steps"]}, key=["import torch", "load", "first call"].index)
    rows = []
    for name, a in arms.items():
        rows.append(
            [
                f"`{name}`",
                f"{a['wall']:.2f}",
                *(f"{a['steps'].get(k, 0):.2f}" if k in a["steps"] else "–" for k in steps),
                f"{a['wall'] / floor:.2f}",
                f"{a['wall'] / torch_wall:.2f}" if torch_wall else "–",
            ]
        )
    return "\n".join(
        [
            f"{data['device']}, {data['rounds']} rounds, each arm a fresh process "
            f"({'a shared warm' if data['warm_cache'] else 'a fresh empty'} TORCHINDUCTOR_CACHE_DIR); seconds, medians:",
            "",
            md_table(["arm", "process wall s", *(f"{k} s" for k in steps), f"/ `{FLOOR}`", "/ torch's loader"], rows),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("Cold start of torch's loader, the direct loader and runtime_probe.load, fresh processes.", 5, 2)
    add_package_arg(parser)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument(
        "--warm-cache", action="store_true", help="share one TORCHINDUCTOR_CACHE_DIR across runs (default: a fresh one each)"
    )
    parser.add_argument(
        "--arms",
        default=",".join(dict.fromkeys(mode for _, mode, _ in ARMS)),
        help="comma-separated arm modes to run (default all: %(default)s); `direct` always runs (the floor)",
    )
    args = parser.parse_args(argv)
    wanted = set(args.arms.split(",")) | {"direct"}
    modes = list(dict.fromkeys(mode for _, mode, _ in ARMS))
    unknown = wanted - set(modes)
    if unknown:
        parser.error(f"unknown arm mode(s) {sorted(unknown)}; choose from {','.join(modes)}")
    rounds = rounds_of(args)
    tmp = tempfile.mkdtemp(prefix="bench-cold-")
    try:
        pkg = package_or_example(args.package, tmp)
        arms = [(name, _arm(mode, env, pkg, args.device, tmp, args.warm_cache)) for name, mode, env in ARMS if mode in wanted]
        start = wait_for_quiet(args.max_load, args.max_wait, max_busy=args.max_busy)
        results = interleave(arms, rounds, warmup=args.warmup, label="s")
        end = load_snapshot()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary: dict[str, Any] = {}
    for name, samples in results.items():
        steps = {k: round(statistics.median(s.extra["steps"][k] for s in samples), 3) for k in samples[0].extra["steps"]}
        summary[name] = {
            "wall": round(statistics.median(s.seconds for s in samples), 3),
            "steps": steps,
            "values": [round(s.seconds, 3) for s in samples],
        }
    data: dict[str, Any] = {
        "name": "cold_start",
        "title": "Cold start: torch's loader, the direct loader and runtime_probe.load (issue 14)",
        "rounds": rounds,
        "warmup": args.warmup,
        "device": args.device,
        "warm_cache": args.warm_cache,
        "machine": machine(),
        "load_start": start,
        "load_end": end,
        "arms": summary,
    }
    data["markdown"] = render(data)
    log("done")
    return publish(data, start, end, args.json)


if __name__ == "__main__":
    sys.exit(main())
