#!/usr/bin/env bash
# The debug twin's schedule on the GPU, A/B (docs/zoo.md, "The twin's schedule on the GPU"):
# the same models built with --twin-schedule after (the CUDA default: the twin compiles after the
# release model, reusing its Triton kernels) and with --twin-schedule concurrent (a child process
# compiles it beside the release model), JOBS models at a time, at full size.
#   OUT=/somewhere JOBS=2 bash scripts/gpu_zoo_ab.sh resnet18 bert
# Run A has the bare path (the ratio's denominator); run B skips it (--no-bare), and its builds are
# compared with run A's bare times. Both write $OUT/ab-<schedule>.json; commit them under
# docs/zoo-runs/ and print the comparison with `python -m zoo.ab docs/zoo-runs/ab-after.json
# docs/zoo-runs/ab-concurrent.json`.
set -u
OUT=${OUT:-$PWD/gpu-zoo-ab-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu/cxx_runtime.sh"
export LD_PRELOAD=$PRELOAD
NAMES=("$@"); [ ${#NAMES[@]} -gt 0 ] || NAMES=(resnet18 bert)
COMMON=(--size full --device cuda --jobs "${JOBS:-2}" --bare-loader direct --timeout 400)
$PY -m zoo.parity "${NAMES[@]}" "${COMMON[@]}" --deadline "${DEADLINE_A:-300}" \
  --build-arg=--twin-schedule --build-arg=after --json "$OUT/ab-after.json" 2> "$OUT/ab-after.log"
echo "A (after) rc=$?"; tail -3 "$OUT/ab-after.log"
$PY -m zoo.parity "${NAMES[@]}" "${COMMON[@]}" --no-bare --deadline "${DEADLINE_B:-230}" \
  --build-arg=--twin-schedule --build-arg=concurrent --json "$OUT/ab-concurrent.json" 2> "$OUT/ab-concurrent.log"
echo "B (concurrent) rc=$?"; tail -3 "$OUT/ab-concurrent.log"
$PY -m zoo.ab "$OUT/ab-after.json" "$OUT/ab-concurrent.json"
