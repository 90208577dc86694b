#!/usr/bin/env bash
# The twin's child below the release compile, A/B (issue 26; docs/zoo.md, "The twin's niceness on
# the GPU"): the same models built with the twin's child at the build's own priority (A) and at
# niceness 19 (B: AOTI_GUARD_TWIN_NICE=19), JOBS models at a time, at full size, builds only.
#   OUT=/somewhere JOBS=4 bash scripts/gpu_twin_nice_ab.sh resnet18 bert swin_t clip_vision
set -u
OUT=${OUT:-$PWD/gpu-nice-ab-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu/cxx_runtime.sh"
export LD_PRELOAD=$PRELOAD
NAMES=("$@"); [ ${#NAMES[@]} -gt 0 ] || NAMES=(resnet18 bert swin_t clip_vision)
COMMON=(--size full --device cuda --jobs "${JOBS:-4}" --bare-loader direct --timeout 400 --no-bare --steps build)
AOTI_GUARD_TWIN_NICE=0 $PY -m zoo.parity "${NAMES[@]}" "${COMMON[@]}" --deadline "${DEADLINE_A:-240}" \
  --json "$OUT/ab-nice0.json" 2> "$OUT/ab-nice0.log" > /dev/null
echo "A (nice 0) rc=$?"
AOTI_GUARD_TWIN_NICE=19 $PY -m zoo.parity "${NAMES[@]}" "${COMMON[@]}" --deadline "${DEADLINE_B:-240}" \
  --json "$OUT/ab-nice19.json" 2> "$OUT/ab-nice19.log" > /dev/null
echo "B (nice 19) rc=$?"
$PY - "$OUT/ab-nice0.json" "$OUT/ab-nice19.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def row(r):
    g = r.get("build") or {}
    ph = {k: (v or {}).get("seconds") for k, v in (g.get("phases") or {}).items()}
    return g.get("ok"), g.get("seconds"), ph.get("compile"), ph.get("validate"), ph.get("debug_twin"), (g.get("twin") or {}).get("max_abs_vs_release")
rb = {r["name"]: r for r in b.get("results", [])}
print("model | A ok, build, compile, validate, twin, twin vs release | B ok, build, compile, validate, twin, twin vs release")
for r in a.get("results", []):
    print(r["name"], "|", row(r), "|", row(rb[r["name"]]) if r["name"] in rb else "-")
PY
