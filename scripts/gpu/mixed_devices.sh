#!/usr/bin/env bash
# Issue 43 on CUDA, one call: (1) a CUDA model taking its embedding ids on the CPU, built without
# --device (each input's device recorded), probed, guard-loaded and called right and with the ids
# on cuda (refused by name); (2) the tiny Qwen2 built for cuda, a new checkpoint (every tensor
# x 1.01), `aoti-guard references` for it, and the probe of the new package with those weights
# (compared, no NOT CHECKED line).
# Run from the repo root on the lent GPU machine: OUT=/somewhere bash scripts/gpu/mixed_devices.sh
. "$(dirname "$0")/preamble.sh" gpu-mixed-out
s=$(date +%s)
LD_PRELOAD=$PRELOAD timeout 200 $PY -m aoti_guard build scripts/gpu/cuda_factories.py:cpu_ids_on_cuda --no-debug-twin \
  -o "$OUT/ids.pt2" --json "$OUT/ids.build.json" > "$OUT/ids.build.txt" 2>&1
echo "build cpu_ids_on_cuda (no --device): rc=$? in $(( $(date +%s) - s ))s"; tail -n 3 "$OUT/ids.build.txt"
LD_PRELOAD=$PRELOAD timeout 120 $PY -m runtime_probe "$OUT/ids.pt2" --json "$OUT/ids.probe.json" > "$OUT/ids.probe.txt" 2>&1
echo "probe ids.pt2: rc=$?"; grep -E "^PASSED|^FAILED|error" "$OUT/ids.probe.txt" | head -n 6
LD_PRELOAD=$PRELOAD timeout 120 $PY - "$OUT/ids.pt2" <<'PY'
import sys, torch, runtime_probe
from runtime_probe.reporting.errors import InputContractError
from scripts.gpu.cuda_factories import cpu_ids_on_cuda
m = runtime_probe.load(sys.argv[1])
print("recorded inputs:", [(i.name, i.tensor.device) for i in m.manifest.io.inputs if i.tensor], "outputs:", [(o.name, o.tensor.device) for o in m.manifest.io.outputs if o.tensor])
model, (ids, x) = cpu_ids_on_cuda()
out, ref = m(ids, x), model(ids, x)
print("guarded call, ids on cpu: outputs on", [str(t.device) for t in out], "max |package - eager|", max(float((a.cpu() - b.cpu()).abs().max()) for a, b in zip(out, ref)))
try:
    m(ids.cuda(), x)
    print("guarded call, ids on cuda: ACCEPTED (wrong)")
except InputContractError as e:
    print("guarded call, ids on cuda: refused", e.code, "|", str(e).splitlines()[0])
PY
echo "guarded load: rc=$?"
s=$(date +%s)
LD_PRELOAD=$PRELOAD timeout 300 $PY -m aoti_guard build tests/zoo/checkpoint_models.py:qwen2_tied --device cuda --no-debug-twin \
  -o "$OUT/qwen.pt2" > "$OUT/qwen.build.txt" 2>&1
echo "build qwen2_tied --device cuda: rc=$? in $(( $(date +%s) - s ))s"; tail -n 1 "$OUT/qwen.build.txt"
W=$OUT/w; mkdir -p "$W"; $PY scripts/gpu/checkpoint_files.py "$W" > /dev/null
s=$(date +%s)
LD_PRELOAD=$PRELOAD timeout 200 $PY -m aoti_guard references "$OUT/qwen.pt2" tests/zoo/checkpoint_models.py:qwen2_tied \
  --weights "$W/new.safetensors" -o "$OUT/qwen_new.pt2" > "$OUT/refs.txt" 2>&1
echo "references for new.safetensors: rc=$? in $(( $(date +%s) - s ))s"; tail -n 3 "$OUT/refs.txt"
LD_PRELOAD=$PRELOAD timeout 200 $PY -m runtime_probe "$OUT/qwen_new.pt2" --weights "$W/new.safetensors" > "$OUT/probe_new.txt" 2>&1
echo "probe qwen_new.pt2 --weights new.safetensors: rc=$?"; grep -E "NOT CHECKED|^PASSED|^FAILED|golden|compared" "$OUT/probe_new.txt" | head -n 8
echo "NOT CHECKED lines: $(grep -c 'NOT CHECKED' "$OUT/probe_new.txt")"
rm -rf "$W" "$OUT"/*.pt2
