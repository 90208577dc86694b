#!/usr/bin/env bash
# Issue 43 on CUDA: the tiny Qwen2 (tied embeddings, rotary inv_freq) built for cuda, then probed
# with the weights files users have: state_dict(), save_pretrained's file, and a new checkpoint
# (reported as not compared); and the guarded loader taking save_pretrained's file.
# Run from the repo root on the lent GPU machine: OUT=/somewhere bash scripts/gpu/checkpoint_weights.sh
. "$(dirname "$0")/preamble.sh" gpu-checkpoint-out
s=$(date +%s)
LD_PRELOAD=$PRELOAD timeout 400 $PY -m aoti_guard build tests/zoo/checkpoint_models.py:qwen2_tied --device cuda --no-debug-twin \
  -o "$OUT/qwen.pt2" --json "$OUT/qwen.build.json" > "$OUT/qwen.build.txt" 2>&1
echo "build qwen2_tied --device cuda: rc=$? in $(( $(date +%s) - s ))s"; tail -n 2 "$OUT/qwen.build.txt"
W=$OUT/w; mkdir -p "$W"; $PY scripts/gpu/checkpoint_files.py "$W"
for f in state_dict.safetensors pretrained/model.safetensors new.safetensors; do
  tag=$(basename "$(dirname "$f")")_$(basename "$f" .safetensors)
  LD_PRELOAD=$PRELOAD timeout 200 $PY -m runtime_probe "$OUT/qwen.pt2" --weights "$W/$f" --json "$OUT/probe_$tag.json" > "$OUT/probe_$tag.txt" 2>&1
  echo "probe --weights $f: rc=$?"; grep -E "constants\.|NOT CHECKED|^PASSED|^FAILED" "$OUT/probe_$tag.txt" | head -n 6
done
LD_PRELOAD=$PRELOAD timeout 200 $PY - "$OUT/qwen.pt2" "$W/pretrained/model.safetensors" <<'PY'
import sys, torch, runtime_probe
from tests.zoo.checkpoint_models import example_ids, model
m = runtime_probe.load(sys.argv[1], weights=sys.argv[2])
ids = example_ids().cuda()
out = m(input_ids=ids)
ref = model().cuda()(input_ids=ids)
a = out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)
b = ref.logits
print("guarded load with save_pretrained's file: max |package - eager| =", float((a.float() - b.float()).abs().max()))
PY
echo "guarded loader: rc=$?"
