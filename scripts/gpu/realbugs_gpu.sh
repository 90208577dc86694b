#!/usr/bin/env bash
# Issue 42: the public-record corpus's GPU cases (tests/realbugs, marked gpu), both sides (bare AOTI and
# aoti-guard), on a lent machine with two GPUs (two of the cases load on cuda:1).
# Run from the repo root on the GPU machine: OUT=/somewhere bash scripts/gpu/realbugs_gpu.sh
set -u
OUT=${OUT:-$PWD/gpu-realbugs-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/cxx_runtime.sh"
{ date -u; nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.device_count(), 'GPUs')"; } > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
LD_PRELOAD=$PRELOAD AOTI_GUARD_REALBUGS_OUTCOMES="$OUT/outcomes" timeout 500 $PY -m pytest -m gpu tests/realbugs -q -n 0 -p no:cacheprovider -rA 2>&1 | tail -n 40
for f in "$OUT"/outcomes/*.json; do echo "$(basename "$f" .json): $(cat "$f")"; done
