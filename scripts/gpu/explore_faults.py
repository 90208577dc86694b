"""Raw behaviour of CUDA faults in AOTI packages, recorded for the escalation ladder.

Usage: python3 scripts/gpu/explore_faults.py OUTDIR PKG_GATHER PKG_NAN
Runs each bad case in a fresh child (it may die) and saves stdout/stderr/returncode as JSON, plus
the bad inputs as safetensors (names = the contract's input names) for `probe --inputs`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

OUT, GATHER, NAN = sys.argv[1], sys.argv[2], sys.argv[3]

RUN = r"""
import os, sys, torch
import runtime_probe
from runtime_probe.formats import safetensors as _safetensors
pkg, which, inputs = sys.argv[1], sys.argv[2], sys.argv[3]
t = _safetensors.load(inputs, device="cuda")
m = runtime_probe.load(pkg, model=which)
names = [i.name for i in m.manifest.io.tensor_inputs()]
out = m.compiled(*[t[n] for n in names])
torch.cuda.synchronize()
print("RESULT nonfinite:", int((~torch.isfinite(out)).sum()), "shape:", tuple(out.shape), flush=True)
"""


def run(tag: str, pkg: str, which: str, inputs: str, env: dict[str, str], prefix: list[str] | None = None, timeout: int = 240) -> None:
    argv = [*(prefix or []), sys.executable, "-X", "faulthandler", "-c", RUN, pkg, which, inputs]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env})
        rec = {
            "argv": argv[: len(prefix or []) + 1],
            "env": env,
            "rc": p.returncode,
            "stdout": p.stdout[-20000:],
            "stderr": p.stderr[-20000:],
        }
    except subprocess.TimeoutExpired as exc:
        rec = {"argv": argv[:3], "env": env, "rc": "timeout", "stdout": str(exc.stdout)[-5000:], "stderr": str(exc.stderr)[-5000:]}
    with open(os.path.join(OUT, f"fault_{tag}.json"), "w") as fh:
        json.dump(rec, fh, indent=1)
    print(tag, rec["rc"], flush=True)


def main() -> None:
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    bad_gather = os.path.join(OUT, "gather_bad_inputs.safetensors")
    table = torch.randn(4096)
    idx = torch.randint(0, 4096, (256,))
    idx[77] = 1 << 30  # far outside the 4096-element table
    _safetensors.dump({"table": table, "idx": idx}, bad_gather)
    bad_nan = os.path.join(OUT, "nan_bad_inputs.safetensors")
    x = torch.rand(8, 32) + 1.0
    x[3] = -1.0  # row 3: h < 1 -> sqrt(NaN)
    _safetensors.dump({"x": x}, bad_nan)

    blocking = {"CUDA_LAUNCH_BLOCKING": "1", "PYTHONUNBUFFERED": "1"}
    strict = {**blocking, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "AOTI_RUNTIME_CHECK_INPUTS": "1"}
    run("gather_release_plain", GATHER, "model", bad_gather, {"PYTHONUNBUFFERED": "1"})
    run("gather_release_strict", GATHER, "model", bad_gather, strict)
    run("gather_twin_strict", GATHER, "debug_twin", bad_gather, strict)
    run(
        "gather_memcheck",
        GATHER,
        "model",
        bad_gather,
        strict,
        ["compute-sanitizer", "--tool", "memcheck", "--print-limit", "5"],
        timeout=400,
    )
    run("nan_release", NAN, "model", bad_nan, blocking)
    run("nan_twin", NAN, "debug_twin", bad_nan, strict)
    # a CPU tensor handed to the CUDA package: silent with caching, and with caching off?
    cpu_case = r"""
import sys, torch
m = torch._inductor.aoti_load_package(sys.argv[1])
x = torch.rand(8, 32) + 1.0
try:
    out = m(x); torch.cuda.synchronize(); print("RESULT ran; device", out.device, "finite", bool(torch.isfinite(out).all()))
except Exception as exc:
    print("RESULT raised", type(exc).__name__, str(exc)[:500])
"""
    for tag, env in (
        ("cpu_tensor_cached", {}),
        ("cpu_tensor_nocache", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUDA_LAUNCH_BLOCKING": "1"}),
        ("cpu_tensor_checked", {"AOTI_RUNTIME_CHECK_INPUTS": "1"}),
    ):
        p = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", cpu_case, NAN],
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, **env},
        )
        with open(os.path.join(OUT, f"fault_{tag}.json"), "w") as fh:
            json.dump({"env": env, "rc": p.returncode, "stdout": p.stdout[-8000:], "stderr": p.stderr[-8000:]}, fh, indent=1)
        print(tag, p.returncode, flush=True)


if __name__ == "__main__":
    main()
