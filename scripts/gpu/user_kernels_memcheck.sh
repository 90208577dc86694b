#!/usr/bin/env bash
# Issue 43 on CUDA: user Triton kernels under memcheck. memcheck's raw output on the unmasked kernel
# with and without the caching allocator (kept for tests/unit/data/gpu), an unmasked triton_op
# refused at build with the kernel named, a masked one passing, the cost (build with and without
# memcheck), the probe naming the kernel for an unmasked package built with --no-memcheck; and
# whether AOTI itself serves a CPU input / CPU output on a CUDA model (per-leaf devices).
# Run from the repo root on the lent GPU machine: OUT=/somewhere bash scripts/gpu/user_kernels_memcheck.sh
. "$(dirname "$0")/preamble.sh" gpu-memcheck-out
compute-sanitizer --version 2>&1 | tail -n 1 | tee -a "$OUT/facts.txt"
F=scripts/gpu/user_kernels.py
B="$PY -m aoti_guard build --no-debug-twin"
build() {  # tag, extra args...
  local tag=$1; shift; local s; s=$(date +%s%N)
  LD_PRELOAD=$PRELOAD timeout 300 $B "$@" -o "$OUT/$tag.pt2" --json "$OUT/$tag.build.json" > "$OUT/$tag.build.txt" 2>&1
  local rc=$?; echo "build $tag ($*): rc=$rc in $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$OUT/summary.txt"
}
# 1. memcheck's own output, no aoti-guard: caching allocator on, then off
compute-sanitizer --tool memcheck $PY scripts/gpu/memcheck_raw.py > "$OUT/memcheck_caching.txt" 2>&1
PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --print-limit 4 $PY scripts/gpu/memcheck_raw.py > "$OUT/memcheck_nocaching.txt" 2>&1
grep -E "ERROR SUMMARY|^raised|ran;" "$OUT/memcheck_caching.txt" "$OUT/memcheck_nocaching.txt"
# 2. in parallel: the unmasked kernel with memcheck (default: the program holds a triton_op) and
# without, and AOTI's own answer on mixed devices
build unmasked "$F:unmasked" &
build unmasked_nomc "$F:unmasked" --no-memcheck &
LD_PRELOAD=$PRELOAD timeout 300 $PY scripts/gpu/mixed_devices_aoti.py "$OUT" > "$OUT/mixed_aoti.txt" 2>&1 &
wait
rm -f "$OUT/cpu_ids.pt2"
# 3. the masked kernel, one at a time for the cost: warm the compile cache, then with and without
build masked_warm "$F:masked" --no-memcheck
build masked "$F:masked"
build masked_nomc "$F:masked" --no-memcheck
build masked_forced "$F:masked" --memcheck
# 4. the probe of the unmasked package built with --no-memcheck: its manifest records the triton_op
LD_PRELOAD=$PRELOAD timeout 300 $PY -m runtime_probe "$OUT/unmasked_nomc.pt2" --json "$OUT/probe_unmasked.json" > "$OUT/probe_unmasked.txt" 2>&1
echo "probe unmasked_nomc.pt2: rc=$?" >> "$OUT/summary.txt"
LD_PRELOAD=$PRELOAD timeout 300 $PY -m runtime_probe "$OUT/masked.pt2" --json "$OUT/probe_masked.json" > "$OUT/probe_masked.txt" 2>&1
echo "probe masked.pt2: rc=$?" >> "$OUT/summary.txt"
LD_PRELOAD=$PRELOAD timeout 300 $PY -m runtime_probe "$OUT/unmasked_nomc.pt2" --no-memcheck > "$OUT/probe_unmasked_off.txt" 2>&1
echo "probe unmasked_nomc.pt2 --no-memcheck: rc=$?" >> "$OUT/summary.txt"
rm -f "$OUT"/*.pt2
cat "$OUT/mixed_aoti.txt"
for t in unmasked unmasked_nomc masked masked_nomc masked_forced; do
  $PY - "$OUT/$t.build.json" "$t" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as exc:
    print(sys.argv[2], "no report:", exc); sys.exit()
v = next((p for p in r["phases"] if p["name"] == "validate"), {})
errors = [(f["code"], f["message"][:260]) for p in r["phases"] for f in p["findings"] if f["severity"] in ("error", "warning")]
print(sys.argv[2], "| memcheck:", json.dumps((v.get("detail") or {}).get("memcheck")), "| findings:", errors)
PY
done
grep -E "out_of_bounds|memcheck|PASSED|FAILED" "$OUT"/probe_*.txt | head -n 20
cat "$OUT/summary.txt"
