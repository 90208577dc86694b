"""Issue 25, defect 2: what checking integer inputs' values costs per call, each design side by side.

An id past an embedding table aborts the process on CPU and leaves the CUDA context unusable on a
GPU, so the guarded loader checks value ranges by default (``runtime_probe.guard.values``). Arms,
timed in interleaved blocks of calls in one process (each block ends with a device sync, so queued
GPU work is inside the time):

- ``bare``: ``torch._inductor.aoti_load_package(pkg)(ids)``;
- ``guard``: ``runtime_probe.load(pkg, check_values=False)(ids)``: the contract without values;
- ``sync``: ``check_values="sync"``: the values read before the call (on CUDA: a device sync);
- ``device``: ``check_values="device"``: ids clamped on the device, a bad call's outputs NaN.

Before timing, each arm's output on good ids is compared with ``bare``'s (bit for bit), and a bad
id is sent through ``sync`` (must raise) and ``device`` (must return NaN, then raise at
``raise_for_values()``).

The package: this file's ``embedding`` factory (``Embedding(1000, 64)``, mean over the sequence,
``Linear(64, 8)``; ids int64 [8, 12]), built first (not timed) unless ``--package`` is given.

    python -m bench.value_check_cost [--device cuda] [--package PKG] [--rounds N | --quick] [--json PATH]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable, Sequence
from typing import Any

from bench._common import ROOT, base_parser, child_env, load_snapshot, log, md_table, publish, rounds_of, wait_for_quiet

ARMS = ("bare", "guard", "sync", "device")
GOAL_RATIO = 1.1  # the aim for the default's cost against the bare call


def embedding() -> Any:
    """The build target: a token embedding of 1000 rows over ids [8, 12] (the issue's measurement)."""
    import torch

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.Embedding(1000, 64)
            self.head = torch.nn.Linear(64, 8)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.table(ids).mean(dim=1))

    torch.manual_seed(0)
    return Embed().eval(), (torch.randint(0, 1000, (8, 12)),)


def _build(out_dir: str, device: str) -> str:
    out = os.path.join(out_dir, f"embedding_{device.split(':')[0]}.pt2")
    log(f"building {out} (not timed)")
    argv = [sys.executable, "-m", "aoti_guard", "build", f"{ROOT}/bench/value_check_cost.py:embedding", "-o", out]
    argv += ["--device", device, "--no-debug-twin", "-q"]
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **child_env()}, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"the build failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return out


def _arms(package: str, device: str) -> dict[str, Any]:
    import torch

    import runtime_probe

    return {
        "bare": torch._inductor.aoti_load_package(package),
        "guard": runtime_probe.load(package, device, check_values=False),
        "sync": runtime_probe.load(package, device, check_values="sync"),
        "device": runtime_probe.load(package, device, check_values="device"),
    }


def _checks(models: dict[str, Any], ids: Any, sync: Callable[[], None]) -> dict[str, Any]:
    """Each arm equals bare on good ids; a bad id is refused by sync, NaN then raised by device."""
    import torch

    from runtime_probe.reporting.errors import InputContractError

    ref = models["bare"](ids)
    out: dict[str, Any] = {f"{arm} == bare": bool(torch.equal(models[arm](ids), ref)) for arm in ARMS[1:]}
    bad = ids.clone()
    bad[3, 5] = 5000
    try:
        models["sync"](bad)
        out["sync refuses id 5000"] = False
    except InputContractError as exc:
        out["sync refuses id 5000"] = exc.code == "input.value_range"
    poisoned = models["device"](bad)
    sync()
    out["device: bad call's output all NaN"] = bool(poisoned.isnan().all())
    try:
        models["device"].raise_for_values()
        out["device: raise_for_values() raises"] = False
    except InputContractError as exc:
        out["device: raise_for_values() raises"] = exc.code == "input.value_range"
    out["device: next good call == bare"] = bool(torch.equal(models["device"](ids), ref))
    return out


def _timer(fn: Any, ids: Any, sync: Callable[[], None], calls: int) -> Callable[[], float]:
    timer = timeit.Timer("fn(ids); sync()", globals={"fn": fn, "ids": ids, "sync": sync})

    def run() -> float:
        return timer.timeit(number=calls) / calls * 1e6

    return run


def render(data: dict[str, Any]) -> str:
    us = data["us"]
    bare = statistics.median(us["bare"])
    rows = []
    for arm in ARMS:
        med = statistics.median(us[arm])
        paired = [a / b for a, b in zip(us[arm], us["bare"])]
        rows.append(
            [
                f"`{arm}`",
                f"{med:.1f}",
                f"{min(us[arm]):.1f} – {max(us[arm]):.1f}",
                f"{med / bare:.3f}",
                f"{min(paired):.3f} – {max(paired):.3f}",
            ]
        )
    checks = ", ".join(f"{k}: {'yes' if v else '**NO**'}" for k, v in data["checks"].items())
    return "\n".join(
        [
            f"{data['device_name']} ({data['device']}), torch {data['torch']}; ids int64 {data['ids']}; "
            f"{data['rounds']} interleaved blocks of {data['calls']} calls per arm; µs per call (each block ends with a device sync):",
            "",
            md_table(["arm", "median µs", "per-block min – max", "/ bare", "per-block ratio min – max"], rows),
            "",
            f"Checks before timing: {checks}.",
            f"Goal for the default (`{data['default']}` on {data['device_type']}): ≤ {GOAL_RATIO} × bare; "
            f"measured {statistics.median(us[data['default']]) / bare:.3f}.",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser("The cost of each value-check design per call, against the bare AOTI call.", 30, 5)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--package", metavar="PKG", help="a package whose one input is ids with a value range (default: build one)")
    parser.add_argument("--calls", type=int, default=200, help="calls per timed block (default 200)")
    args = parser.parse_args(argv)
    import torch

    from runtime_probe.guard.values import DEFAULT_MODE

    torch.set_num_threads(1)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    sync: Callable[[], None] = torch.cuda.synchronize if cuda else (lambda: None)
    with tempfile.TemporaryDirectory(prefix="value-check-cost-") as tmp:
        package = os.path.abspath(args.package) if args.package else _build(tmp, args.device)
        models = _arms(package, args.device)
        ids = torch.randint(0, 1000, (8, 12), device=device)
        checks = _checks(models, ids, sync)
        timers = {arm: _timer(models[arm], ids, sync, args.calls) for arm in ARMS}
        for _ in range(max(args.warmup, 1)):
            for arm in ARMS:
                timers[arm]()
        start = wait_for_quiet(args.max_load, args.max_wait, max_busy=args.max_busy)
        us: dict[str, list[float]] = {arm: [] for arm in ARMS}
        rounds = rounds_of(args)
        for r in range(rounds):
            order = ARMS if r % 2 == 0 else ARMS[::-1]  # no arm always first after another's sync
            for arm in order:
                us[arm].append(timers[arm]())
        end = load_snapshot()
    data: dict[str, Any] = {
        "benchmark": "value_check_cost",
        "device": str(device),
        "device_type": device.type,
        "device_name": torch.cuda.get_device_name(device) if cuda else "CPU",
        "torch": torch.__version__,
        "ids": list(ids.shape),
        "rounds": rounds,
        "calls": args.calls,
        "default": DEFAULT_MODE.get(device.type, "sync"),
        "checks": checks,
        "us": {k: [round(v, 2) for v in vs] for k, vs in us.items()},
        "ratio": {arm: round(statistics.median(us[arm]) / statistics.median(us["bare"]), 3) for arm in ARMS},
    }
    data["markdown"] = render(data)
    return publish(data, start, end, args.json)


if __name__ == "__main__":
    sys.exit(main())
