#!/usr/bin/env bash
# Build / bare over the zoo at full size, measured fairly (issue 26; docs/zoo.md, "Build / bare,
# measured fairly"): each model's bare path and its build in the same call, beside the same other
# models, without probe and guard (the parity series, scripts/gpu_zoo.sh, runs those). A series of
# calls of at most ~9.5 minutes each; a model is started only when its earlier runs say it fits in
# the time left (zoo/schedule.py), longest first.
#   OUT=/somewhere bash scripts/gpu_ratio.sh                                  # the first call
#   OUT=/somewhere SERIES="docs/zoo-runs/gpu-ratio-1.json" bash scripts/gpu_ratio.sh   # each later one
# Commit each call's $OUT/gpu-ratio.json as docs/zoo-runs/gpu-ratio-N.json; the table:
#   python -m zoo.ratios docs/zoo-runs/gpu-ratio-*.json
# JOBS processes at a time (default 8 on 16 cores), HEAVY_LANES of the lanes for the models of GBs
# of weights; SCALE multiplies the estimates (the load of JOBS at a time differs from the earlier
# runs'). PAIRED=1 (the default): each model's bare path and build side by side (zoo.parity
# --paired: JOBS=8 is 4 models at a time, each under the same load as its bare path, and a model
# of GBs fits in one call); PAIRED=0: one after the other in a lane, JOBS models at a time.
# timm_vit_tiny is left out: aoti-guard refuses its package (an export guard, docs/zoo.md), so it
# has no build time to divide.
set -u
OUT=${OUT:-$PWD/gpu-ratio-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# the C++ runtime the lent machines need to load any AOTI package (AOTI-FACTS.md)
. "$(dirname "$0")/gpu/cxx_runtime.sh"
export LD_PRELOAD=$PRELOAD
{ date -u; nvidia-smi -L; nproc; free -g | head -2; df -h /tmp | tail -1
  $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
REST=(); for f in ${SERIES:-}; do REST+=(--rest-of "$f"); done
PAIR=(); [ "${PAIRED:-1}" = 1 ] && PAIR=(--paired)
# NAMES: these models only (e.g. NAMES="bert distilbert" JOBS=1: alone on the machine)
NAMES=${NAMES:-$($PY -c "from zoo import models; print(' '.join(n for n in models.names() if n != 'timm_vit_tiny'))")}
# shellcheck disable=SC2086
timeout $(( ${DEADLINE:-570} + 25 )) $PY -m zoo.parity $NAMES --size full --device cuda --jobs "${JOBS:-8}" \
  --heavy-lanes "${HEAVY_LANES:-2}" --bare-loader direct --timeout 560 --deadline "${DEADLINE:-570}" \
  --same-call --steps bare,build --expect $(ls -v docs/zoo-runs/gpu-full-*.json) --expect-scale "${SCALE:-1.0}" \
  "${PAIR[@]}" "${REST[@]}" --json "$OUT/gpu-ratio.json" 2> "$OUT/progress.log"
echo "zoo.parity rc=$?"
grep -E "parity: |not started" "$OUT/progress.log" | tail -40
$PY -m zoo.ratios ${SERIES:-} "$OUT/gpu-ratio.json"
