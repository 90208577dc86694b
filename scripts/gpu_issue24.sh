#!/usr/bin/env bash
# Issue 24 on the lent GPU (docs/gpu-validation.md, run 13): timm vit_tiny at full size.
#   1. scripts/gpu/vit_guard_sizes.py: the guards torch.export records, ep.module() per size, and a
#      bare aoti_compile_and_package package against eager at 32..512 px (plain torch + timm);
#   2. aoti-guard build of the same model: what it names (build.export_specialized, the stage table).
# Run from the repo root: OUT=/somewhere bash scripts/gpu_issue24.sh
set -u
OUT=${OUT:-$PWD/gpu-issue24-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# the C++ runtime the lent machines need to load any AOTI package (AOTI-FACTS.md)
. "$(dirname "$0")/gpu/cxx_runtime.sh"
export LD_PRELOAD=$PRELOAD
{ date -u; nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
timeout 240 $PY scripts/gpu/vit_guard_sizes.py --device cuda --size full --out "$OUT" > "$OUT/sizes.log" 2>&1
echo "vit_guard_sizes rc=$?"; grep -v Warning "$OUT/sizes.log" | grep '^{"side"\|"timm"\|"torch"\|compile_s' | head -12
timeout 330 $PY -m aoti_guard build scripts/gpu/targets.py:vit_tiny_full --device cuda --no-debug-twin \
  -o "$OUT/vit.pt2" --json "$OUT/vit-build.json" > "$OUT/vit-build.txt" 2>&1
echo "aoti-guard build rc=$?"
grep -v '^\[' "$OUT/vit-build.txt" | head -60
rm -f "$OUT"/*.pt2; rm -rf "$OUT"/*.repro
