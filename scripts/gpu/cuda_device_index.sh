#!/usr/bin/env bash
# Issue 42 (#136369, #152087): an AOTI package on a GPU other than the one it was built on. Needs a
# machine with two GPUs (nvidia-h100-x2 / nvidia-h200-x2). Plain AOTI first, each way of loading and
# calling in its own child (scripts/gpu/cuda_device_index.py), then aoti-guard's loader and probe on
# the corpus's CUDA package at cuda:1.
# Run from the repo root on the GPU machine: OUT=/somewhere bash scripts/gpu/cuda_device_index.sh
. "$(dirname "$0")/preamble.sh" gpu-device-index-out
LD_PRELOAD=$PRELOAD timeout 360 $PY scripts/gpu/cuda_device_index.py "$OUT" 2>&1 | tail -n 40
echo "--- aoti-guard on tests/data/cuda_example.pt2 at cuda:1"
LD_PRELOAD=$PRELOAD timeout 120 $PY - <<'PY' 2>&1 | grep -v Warning | tail -n 15
import torch, runtime_probe
m = runtime_probe.load("tests/data/cuda_example.pt2", device="cuda:1")
print("loaded on", m.device if hasattr(m, "device") else "?")
args = [torch.randn(*(d if isinstance(d, int) else 4 for d in i.tensor.shape), device="cuda:1") if i.tensor else None for i in m.manifest.io.inputs]
print("inputs", [(i.name, i.tensor.shape if i.tensor else None) for i in m.manifest.io.inputs])
try:
    out = m(*[a for a in args if a is not None])
    print("guarded call on cuda:1: ok", [str(t.device) for t in out] if isinstance(out, (list, tuple)) else out.device)
except Exception as e:
    print("guarded call on cuda:1:", type(e).__name__, str(e)[:600])
PY
LD_PRELOAD=$PRELOAD timeout 180 $PY -m runtime_probe tests/data/cuda_example.pt2 --device cuda:1 --json "$OUT/probe1.json" > "$OUT/probe1.txt" 2>&1
echo "probe --device cuda:1: rc=$?"; tail -n 25 "$OUT/probe1.txt"
