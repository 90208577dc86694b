"""Which instrument the debug twin carries (issue 26): the NaN/Inf asserts with the kernel-name
printer (``nan_asserts`` + printer level 3, the twin until issue 26) against the value printer
alone (level 2, no asserts), on a model that holds -inf by design and produces a NaN elsewhere.

Per arm, in fresh processes and a fresh Inductor cache: the AOTI compile's seconds, then a good
call (the golden inputs) and a bad one (a NaN injected): each call's seconds, the bytes and lines
it printed, and what it localises (the assert's message; the printer's first departure from the
good call's non-finite baseline, runtime_probe/ladder/printer.py).

    python -m bench.twin_printer [--model masked_nan|opt|llama|qwen2|bart] [--size small|full] [--device cpu|cuda] [--arm printer]

``masked_nan`` (tests/integration/models.py) takes an additive causal mask and turns NaN on a
negative input; a zoo model (small size, CPU) holds its own -inf mask and is given a NaN in one
weight (``load_constants``) for the bad call.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ARMS = {
    "asserts+names": {"nan_asserts": True, "aot_inductor.debug_intermediate_value_printer": "3"},
    "printer": {"nan_asserts": False, "aot_inductor.debug_intermediate_value_printer": "2"},
}


# the size and device of the zoo model (and of masked_nan's inputs), passed to the children
SIZE = os.environ.get("TWIN_PRINTER_SIZE", "small")
DEVICE = os.environ.get("TWIN_PRINTER_DEVICE", "cpu")


def _spec(model: str) -> tuple[Any, tuple[Any, ...], dict[str, Any], Any]:
    if model == "masked_nan":
        from tests.integration.models import masked_nan

        m, args = masked_nan()
        return m.to(DEVICE), tuple(a.to(DEVICE) for a in args), {}, None
    from zoo.models import build

    spec = build(model, SIZE, DEVICE)
    return spec.model, tuple(spec.args), dict(spec.kwargs), spec.dynamic_shapes


def _bad_inputs(model: str, m: Any, args: tuple[Any, ...], compiled: Any) -> tuple[Any, ...]:
    import torch

    if model == "masked_nan":
        x = args[0].clone()
        x[0, 1, 2] = -1.0
        return (x, *args[1:])
    state = m.state_dict()
    names = [n for n in compiled.get_constant_fqns() if n in state and n.endswith("weight") and ".1." in n]  # the second layer's
    name = names[len(names) // 2]
    compiled.load_constants({name: torch.full_like(state[name], float("nan"))}, check_full_update=False)
    print(f"NAN-WEIGHT {name}", file=sys.stderr)
    return args


def child_compile(model: str, arm: str, out: str) -> None:
    import torch

    m, args, kwargs, dynamic = _spec(model)
    ep = torch.export.export(m, args, kwargs, dynamic_shapes=dynamic)
    started = time.perf_counter()
    torch._inductor.aoti_compile_and_package(ep, package_path=out, inductor_configs=dict(ARMS[arm]))
    print(json.dumps({"compile_s": time.perf_counter() - started}), file=sys.stderr)


def child_run(model: str, pkg: str, which: str) -> None:
    import torch

    m, args, kwargs, _ = _spec(model)
    compiled = torch._inductor.aoti_load_package(pkg)
    if which == "bad":
        args = _bad_inputs(model, m, args, compiled)
    started = time.perf_counter()
    raised = None
    try:
        compiled(*args, **kwargs)
        if DEVICE != "cpu":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the assert's message is the result
        raised = str(exc).splitlines()[0][:300]
    sys.stdout.flush()
    print(json.dumps({"run_s": time.perf_counter() - started, "raised": raised}), file=sys.stderr)


def _child(args: list[str], env: dict[str, str], stdout: Any = subprocess.DEVNULL) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.twin_printer", "--child", *args], env=env, stdout=stdout, stderr=subprocess.PIPE, text=True
    )
    tail = [line for line in proc.stderr.splitlines() if line.startswith("{")]
    if not tail:
        raise SystemExit(f"child {args} failed:\n{proc.stderr[-3000:]}")
    named = [line.split(" ", 1)[1] for line in proc.stderr.splitlines() if line.startswith("NAN-WEIGHT")]
    extra = {"nan_weight": named[-1]} if named else {}
    return {**json.loads(tail[-1]), **extra}


def measure(model: str, folder: Path, arms: list[str]) -> dict[str, Any]:
    from runtime_probe.ladder import printer

    rows: dict[str, Any] = {}
    for arm in arms:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(folder / f"cache-{arm}")}
        pkg = folder / f"{model}-{arm}.pt2"
        row = _child(["compile", model, arm, str(pkg)], env)
        texts = {}
        for which in ("good", "bad"):
            log = folder / f"{model}-{arm}-{which}.out"
            with open(log, "w") as fh:
                got = _child(["run", model, str(pkg), which], env, stdout=fh)
            texts[which] = log.read_text()
            row[which] = {**got, "bytes": len(texts[which].encode()), "lines": texts[which].count("\n")}
        if arm == "printer":
            base = printer.baseline([printer.parse_prints(texts["good"])])
            row["baseline"] = base
            dep = printer.first_departure(printer.parse_prints(texts["bad"]), base)
            row["localised"] = dep.__dict__ if dep else None
            row["good_departure"] = printer.first_departure(printer.parse_prints(texts["good"]), base) is not None
        rows[arm] = row
    return rows


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        kind, *rest = sys.argv[2:]
        (child_compile if kind == "compile" else child_run)(*rest)
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="masked_nan")
    ap.add_argument("--keep", default=None, help="folder to keep the packages and printed output in")
    ap.add_argument("--size", default="small", choices=("small", "full"), help="the zoo model's size")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument(
        "--arm",
        action="append",
        choices=list(ARMS),
        help="measure only this arm (repeatable; default both): a full-size model's arms can run as two processes at once",
    )
    a = ap.parse_args()
    os.environ["TWIN_PRINTER_SIZE"], os.environ["TWIN_PRINTER_DEVICE"] = a.size, a.device
    folder = Path(a.keep or tempfile.mkdtemp(prefix="twin-printer-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(
        json.dumps({"model": a.model, "size": a.size, "device": a.device, "arms": measure(a.model, folder, a.arm or list(ARMS))}, indent=1)
    )


if __name__ == "__main__":
    main()
