#!/usr/bin/env bash
# The debug twin's kernel tuning on the GPU, A/B (issue 26; docs/zoo.md, "The twin's tuning on the
# GPU"): the same models built with --twin-tuning release (A: the twin's pointwise kernels tuned as
# the release model's) and with the default, light (B: one heuristic config each), JOBS models at a
# time, at full size, builds only (the bare path's times are the ratio series', gpu_ratio.sh).
#   OUT=/somewhere JOBS=4 bash scripts/gpu_twin_tuning_ab.sh resnet18 bert swin_t clip_vision
# Writes $OUT/ab-release.json and $OUT/ab-light.json (commit them under docs/zoo-runs/) and prints
# the build, compile and twin seconds of both side by side (python -m zoo.ab A B prints the table).
set -u
OUT=${OUT:-$PWD/gpu-tuning-ab-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export LD_PRELOAD=$(ldconfig -p | grep -m1 'libstdc++.so.6 (libc6,x86-64)' | awk '{print $NF}')
NAMES=("$@"); [ ${#NAMES[@]} -gt 0 ] || NAMES=(resnet18 bert swin_t clip_vision)
COMMON=(--size full --device cuda --jobs "${JOBS:-4}" --bare-loader direct --timeout 400 --no-bare --steps build)
$PY -m zoo.parity "${NAMES[@]}" "${COMMON[@]}" --deadline "${DEADLINE_A:-275}" \
  --build-arg=--twin-tuning --build-arg=release --json "$OUT/ab-release.json" 2> "$OUT/ab-release.log" > /dev/null
echo "A (release) rc=$?"
$PY -m zoo.parity "${NAMES[@]}" "${COMMON[@]}" --deadline "${DEADLINE_B:-275}" \
  --build-arg=--twin-tuning --build-arg=light --json "$OUT/ab-light.json" 2> "$OUT/ab-light.log" > /dev/null
echo "B (light) rc=$?"
$PY - "$OUT/ab-release.json" "$OUT/ab-light.json" <<'PY'
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
