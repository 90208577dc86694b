#!/usr/bin/env bash
# The zoo at full size on the lent GPU machine (issue 12; docs/zoo.md, "GPU (full size)").
# Run from the repo root, one call of at most ~9 minutes each:
#   OUT=/somewhere bash scripts/gpu_zoo.sh                          # the first call
#   OUT=/somewhere REST_OF=docs/zoo-runs/gpu-full-1.json bash scripts/gpu_zoo.sh [NAMES]   # each later call (NAMES: run these first)
#   REST_OF="docs/zoo-runs/gpu-full-7.json docs/zoo-runs/gpu-full-8.json"   # a series: what none of them finished
# Each call writes $OUT/gpu-full.json (every model it finished or cut, and the environment) and
# $OUT/gpu-full.md; commit the JSON under docs/zoo-runs/ (gpu-full-1.json, -2...) so that the next
# call, on a fresh machine, can skip what is done (--rest-of), and regenerate the page with
# `python -m zoo.parity --report docs/zoo-runs/gpu-full-*.json`.
# JOBS models run at once (default 8 on 16 cores): the per-model times are then rough.
# Arguments go to zoo.parity: model names to run first, or e.g. --build-arg=--twin-schedule --build-arg=concurrent.
set -u
OUT=${OUT:-$PWD/gpu-zoo-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# the C++ runtime the lent machines need to load any AOTI package (AOTI-FACTS.md)
. "$(dirname "$0")/gpu/cxx_runtime.sh"
export LD_PRELOAD=$PRELOAD
{ date -u; nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"
  $PY -c "import torchvision, timm, transformers; print('torchvision', torchvision.__version__, 'timm', timm.__version__, 'transformers', transformers.__version__)"; } > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
# REST_OF: one saved run, or several separated by spaces (a series of calls)
REST=(); for f in ${REST_OF:-}; do REST+=(--rest-of "$f"); done
# no --out: full-size packages are GBs and would not come back; the JSON holds every result
timeout $(( ${DEADLINE:-510} + 50 )) $PY -m zoo.parity --size full --device cuda --jobs "${JOBS:-8}" --bare-loader direct --timeout 480 --deadline "${DEADLINE:-510}" \
  "${REST[@]}" "$@" --json "$OUT/gpu-full.json" --markdown "$OUT/gpu-full.md" 2> "$OUT/progress.log"
echo "zoo.parity rc=$?"
tail -5 "$OUT/progress.log"
cat "$OUT/gpu-full.md" 2>/dev/null | tail -8
