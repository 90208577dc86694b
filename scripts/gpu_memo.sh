#!/usr/bin/env bash
# The test run's compile memo (tests/tools/cxx_memo/g++, issue 27) on the GPU machine's torch:
# the unit suite (tests/unit/test_cxx_memo.py among it), then the bundled example built for CUDA
# twice and the static test model for CPU twice through the memo, as a test run's builds are
# (CXX = the memo), with its log of hits and misses, and the second CUDA package probed.
#   OUT=/somewhere bash scripts/gpu_memo.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu/cxx_runtime.sh"
{ date -u; nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"; command -v g++ bash awk sha256sum; } > "$OUT/facts.txt" 2>&1
T0=$(date +%s)
( s=$(date +%s); timeout 280 $PY -m pytest tests/unit -q -p no:cacheprovider -o addopts="-m 'not gpu'" > "$OUT/unit.log" 2>&1; echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$OUT/unit.log" ) &
export CXX=$PWD/tests/tools/cxx_memo/g++ AOTI_GUARD_TEST_CXX_MEMO_DIR=$OUT/memo AOTI_GUARD_TEST_CXX_MEMO_LOG=$OUT/memo.log
build() { local name=$1; shift; s=$(date +%s)
  LD_PRELOAD="$PRELOAD" timeout 280 $PY -m aoti_guard build "$@" -o "$OUT/$name.pt2" --json "$OUT/$name.build.json" > "$OUT/build_$name.log" 2>&1
  echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$OUT/build_$name.log"; echo "$name: $(tail -1 "$OUT/build_$name.log"); memo log lines $(wc -l < "$OUT/memo.log" 2>/dev/null)"; }
{
build cuda1 --device cuda --no-debug-twin
build cuda2 --device cuda --no-debug-twin
build cpu1 tests/integration/models.py:static --no-debug-twin
build cpu2 tests/integration/models.py:static --no-debug-twin
LD_PRELOAD="$PRELOAD" timeout 120 $PY -m aoti_guard probe "$OUT/cuda2.pt2" --json "$OUT/probe_cuda2.json" > "$OUT/probe_cuda2.log" 2>&1; echo "probe cuda2 rc=$?"
} > "$OUT/builds.txt" 2>&1
rm -rf "$OUT/memo" "$OUT"/*.pt2
wait
echo "done in $(( $(date +%s) - T0 ))s" >> "$OUT/facts.txt"
cat "$OUT/builds.txt" "$OUT/memo.log"; tail -n 2 "$OUT/unit.log"
