"""Can AOTInductor serve a mix of devices? A CUDA model given a CPU int input that it moves to the
GPU itself, and returning one output on the CPU: exported, compiled, loaded and called directly
with torch's own API (no aoti-guard), the facts the per-leaf device record would rest on."""

from __future__ import annotations

import sys

import torch

from scripts.gpu.user_kernels import CpuIds

out_dir = sys.argv[1]
model = CpuIds().cuda().eval()
ids = torch.randint(0, 100, (4, 8))  # CPU
x = torch.randn(4, 8, 16, device="cuda")
eager = model(ids, x)
print("eager outputs:", [str(t.device) for t in eager])
try:
    ep = torch.export.export(model, (ids, x))
    print("export: ok; input devices:", [str(n.meta["val"].device) for n in ep.graph.nodes if n.op == "placeholder" and "val" in n.meta])
    path = torch._inductor.aoti_compile_and_package(ep, package_path=f"{out_dir}/cpu_ids.pt2")
    print("compile: ok")
    loaded = torch._inductor.aoti_load_package(path)
    got = loaded(ids, x)
    print(
        "call with ids on cpu: outputs on",
        [str(t.device) for t in got],
        "max diff",
        max(float((a.cpu() - b.cpu()).abs().max()) for a, b in zip(got, eager)),
    )
    try:
        got2 = loaded(ids.cuda(), x)
        print("call with ids on cuda: outputs on", [str(t.device) for t in got2])
    except Exception as exc:  # noqa: BLE001 - the fact is what it raises
        print("call with ids on cuda: raised", type(exc).__name__, str(exc)[:300])
except Exception as exc:  # noqa: BLE001
    print("FAILED:", type(exc).__name__, str(exc)[:600])
