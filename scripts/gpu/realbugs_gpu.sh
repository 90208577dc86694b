#!/usr/bin/env bash
# Issue 42: the public-record corpus's GPU cases (tests/realbugs, marked gpu), both sides (bare AOTI and
# aoti-guard), on a lent machine with two GPUs (two of the cases load on cuda:1), then the probe of the
# corpus's CUDA package, built here, on cuda:1.
# Run from the repo root on the GPU machine: OUT=/somewhere bash scripts/gpu/realbugs_gpu.sh
. "$(dirname "$0")/preamble.sh" gpu-realbugs-out
# the packages kept (AOTI_GUARD_REALBUGS_PACKAGES) for the probe below
LD_PRELOAD=$PRELOAD AOTI_GUARD_REALBUGS_OUTCOMES="$OUT/outcomes" AOTI_GUARD_REALBUGS_PACKAGES="$OUT/packages" \
  timeout 420 $PY -m pytest -m gpu tests/realbugs -q -n 0 -p no:cacheprovider -rA 2>&1 | tail -n 40
for f in "$OUT"/outcomes/*.json; do echo "$(basename "$f" .json): $(cat "$f")"; done
grep -h -o '"code": "[a-z_.]*"' "$OUT"/packages/cross_gpu.build.json 2>/dev/null | sort | uniq -c
# a package built right on this machine, probed on the second GPU: no false package.kernel_file_missing
if [ -f "$OUT/packages/cuda_mlp.pt2" ]; then
  LD_PRELOAD=$PRELOAD timeout 120 $PY -m runtime_probe "$OUT/packages/cuda_mlp.pt2" --device cuda:1 --json "$OUT/cuda_mlp.probe.json" > "$OUT/cuda_mlp.probe.txt" 2>&1
  echo "probe cuda_mlp.pt2 --device cuda:1: rc=$?"; grep -E "^  [a-z]+ +(passed|failed|skipped)|ERROR|WARN|^PASSED|^FAILED" "$OUT/cuda_mlp.probe.txt" | head -n 20
fi
rm -f "$OUT"/packages/*.pt2
