#!/usr/bin/env bash
# Issue 42: the public-record corpus's CPU rows under this machine's torch (2.11 on the lent GPU
# machines, which no CI lane has): `python -m tests.realbugs.report --json`, several cases at once on
# its CPU cores. Its JSON is docs/realbugs.md's column for that torch (`report --other FILE`).
# Run from the repo root on the lent GPU machine: OUT=/somewhere bash scripts/gpu/realbugs_cpu_rows.sh [WORKERS]
. "$(dirname "$0")/preamble.sh" gpu-realbugs-cpu-out
WORKERS=${1:-8}
s=$(date +%s)
LD_PRELOAD=$PRELOAD OMP_NUM_THREADS=2 timeout 540 $PY -m tests.realbugs.report --workers "$WORKERS" --json "$OUT/realbugs-cpu.json" > "$OUT/realbugs-cpu.md" 2> "$OUT/realbugs-cpu.err"
echo "report: rc=$? in $(( $(date +%s) - s ))s"; tail -n 5 "$OUT/realbugs-cpu.err"
$PY - "$OUT/realbugs-cpu.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
cases = data["cases"]
print(data["cost"], "|", len(cases), "cases,", sum(c["met"] for c in cases.values()), "as asked")
for name, row in cases.items():
    if not row["met"]:
        print("NOT MET", name, row["guard"][:300])
PY
