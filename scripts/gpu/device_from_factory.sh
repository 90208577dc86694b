#!/usr/bin/env bash
# Issue 43: a CUDA factory built without --device (the build takes the factory's device), a factory
# that mixes devices (a usage error naming the tensors), and the probe of the package built.
# Run from the repo root on the lent GPU machine: OUT=/somewhere bash scripts/gpu/device_from_factory.sh
. "$(dirname "$0")/preamble.sh" gpu-device-out
F=scripts/gpu/cuda_factories.py
s=$(date +%s)
LD_PRELOAD=$PRELOAD timeout 400 $PY -m aoti_guard build "$F:conv_on_cuda" -o "$OUT/conv.pt2" --json "$OUT/conv.build.json" > "$OUT/conv.build.txt" 2>&1
echo "build conv_on_cuda (no --device): rc=$? in $(( $(date +%s) - s ))s"; tail -n 3 "$OUT/conv.build.txt"
$PY - "$OUT/conv.build.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
resolve = next(p for p in r["phases"] if p["name"] == "resolve")["detail"]
errors = [f["code"] for p in r["phases"] for f in p["findings"] if f["severity"] == "error"]
print("report device:", r["extra"].get("device"), "| resolve:", resolve.get("device"), "from", resolve.get("device_from"), "| errors:", errors)
print("phases:", [(p["name"], p["status"]) for p in r["phases"]])
PY
LD_PRELOAD=$PRELOAD timeout 120 $PY -m runtime_probe "$OUT/conv.pt2" --json "$OUT/conv.probe.json" > "$OUT/conv.probe.txt" 2>&1
echo "probe: rc=$?"; tail -n 2 "$OUT/conv.probe.txt"
$PY -c "import json,sys; m=json.load(open(sys.argv[1])); print('probe package device:', m.get('package',{}).get('device'), [ (p['name'], p['status']) for p in m['phases']])" "$OUT/conv.probe.json"
s=$(date +%s)
LD_PRELOAD=$PRELOAD timeout 120 $PY -m aoti_guard build "$F:mixed_devices" -o "$OUT/mixed.pt2" > "$OUT/mixed.build.txt" 2>&1
echo "build mixed_devices: rc=$? in $(( $(date +%s) - s ))s"; grep -v '^\[' "$OUT/mixed.build.txt" | head -n 4
LD_PRELOAD=$PRELOAD timeout 400 $PY -m aoti_guard build "$F:mixed_devices" --device cuda -o "$OUT/mixed_moved.pt2" > "$OUT/mixed_moved.build.txt" 2>&1
echo "build mixed_devices --device cuda: rc=$?"; tail -n 2 "$OUT/mixed_moved.build.txt"
