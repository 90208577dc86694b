#!/usr/bin/env bash
# Issue 44: the ONNX Runtime second opinion on the zoo's transformers models that docs/zoo.md's table
# had not run (2.5-4 min each on the 2-core CPU host): built here on the GPU machine's CPU cores,
# several at once (--device cpu: the reference is ONNX Runtime's CPU provider either way).
# Run from the repo root on the lent GPU machine: OUT=/somewhere bash scripts/gpu/onnx_zoo_reference.sh [NAME...]
. "$(dirname "$0")/preamble.sh" gpu-onnx-out
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(gpt2_cache bart wav2vec2 whisper_encoder clip_vision clip_text clip)
for name in "${MODELS[@]}"; do
  ( s=$(date +%s)
    LD_PRELOAD=$PRELOAD OMP_NUM_THREADS=2 timeout 520 $PY -m aoti_guard build "zoo/models.py:$name" --device cpu --no-debug-twin \
      --reference onnxruntime --keep-onnx "$OUT/$name.onnx" -o "$OUT/$name.pt2" --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    echo "$name: rc=$? in $(( $(date +%s) - s ))s" ) &
done
wait
rm -f "$OUT"/*.pt2 "$OUT"/*.onnx "$OUT"/*.onnx.data  # the reports are the result; the files are large
for name in "${MODELS[@]}"; do
  $PY - "$OUT/$name.json" "$name" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    print(sys.argv[2], "no report:", exc); sys.exit(0)
fs = [f for p in r.get("phases", []) for f in p.get("findings", [])]
ref = [f for f in fs if "reference" in f["code"] or "onnx" in f["code"]]
print(sys.argv[2], "| passed:", r.get("passed"), "| phases:", [(p["name"], p["status"]) for p in r.get("phases", [])], "| reference findings:", [(f["code"], f["severity"], f["message"][:300]) for f in ref])
val = next((p for p in r.get("phases", []) if p["name"] == "validate"), {})
refd = (val.get("detail") or {}).get("reference")
print("   reference detail:", json.dumps(refd)[:600] if refd is not None else None)
PY
done
