#!/usr/bin/env bash
# Issue 43: the debug twin of a program that calls a user Triton kernel (torch.library.triton_op),
# built WITH its twin: the twin's child imports the factory's module (runtime/user_modules.py), so it
# loads the saved program and compiles beside the release model (no build.twin_compiled_after).
# Run from the repo root on the lent GPU machine: OUT=/somewhere bash scripts/gpu/user_op_twin.sh
. "$(dirname "$0")/preamble.sh" gpu-twin-op-out
s=$(date +%s)
LD_PRELOAD=$PRELOAD timeout 400 $PY -m aoti_guard build scripts/gpu/user_kernels.py:masked -o "$OUT/masked.pt2" --json "$OUT/masked.json" > "$OUT/masked.txt" 2>&1
echo "build masked (with its twin): rc=$? in $(( $(date +%s) - s ))s"; grep -E "twin|PASSED|FAILED|error" "$OUT/masked.txt" | head -n 12
$PY - "$OUT/masked.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
codes = [(f["code"], f["severity"]) for p in r["phases"] for f in p["findings"]]
twin = next((p for p in r["phases"] if p["name"] == "debug_twin"), {})
print("phases:", [(p["name"], p["status"]) for p in r["phases"]])
print("twin_compiled_after:", any(c == "build.twin_compiled_after" for c, _ in codes), "| user_modules:", r.get("extra", {}).get("user_modules"))
print("twin detail:", json.dumps({k: v for k, v in (twin.get("detail") or {}).items() if k in ("schedule", "where", "child", "waited_s", "compiled")})[:400])
print("findings:", codes)
PY
LD_PRELOAD=$PRELOAD timeout 200 $PY -m runtime_probe "$OUT/masked.pt2" --import scripts/gpu/user_kernels.py > "$OUT/probe.txt" 2>&1
echo "probe --import: rc=$?"; tail -n 2 "$OUT/probe.txt"
