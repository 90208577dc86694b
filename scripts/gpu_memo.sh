#!/usr/bin/env bash
# The test run's compile memo (tests/tools/cxx_memo/g++, issue 27) on the GPU machine's torch:
# the unit suite (tests/unit/test_cxx_memo.py among it), then three integration modules that
# build the same small model several times, with the memo and without it, and how many compiles
# each served from it. The integration modules build for CPU (the machine's torch 2.11).
#   OUT=/somewhere bash scripts/gpu_memo.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PRELOAD=$(ldconfig -p | grep -m1 'libstdc++.so.6 (libc6,x86-64)' | awk '{print $NF}')
{ date -u; nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"; command -v g++ bash awk sha256sum; } > "$OUT/facts.txt" 2>&1
T0=$(date +%s)
( s=$(date +%s); timeout 280 $PY -m pytest tests/unit -q -p no:cacheprovider -o addopts="-m 'not gpu'" > "$OUT/unit.log" 2>&1; echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$OUT/unit.log" ) &
MODS="tests/integration/test_build_targets.py tests/integration/test_markdown.py tests/integration/test_key_grammar.py"
for arm in memo plain; do
  s=$(date +%s)
  if [ "$arm" = plain ]; then export AOTI_GUARD_TEST_CXX_MEMO=0; fi
  LD_PRELOAD="$PRELOAD" timeout 280 $PY -m pytest $MODS -q -p no:cacheprovider -o addopts="" --basetemp="$OUT/bt-$arm" > "$OUT/integration-$arm.log" 2>&1
  echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$OUT/integration-$arm.log"
  echo "memo objects: $(ls "$OUT/bt-$arm/cxx-memo" 2>/dev/null | wc -l)" >> "$OUT/integration-$arm.log"
  rm -rf "$OUT/bt-$arm"
done
wait
echo "done in $(( $(date +%s) - T0 ))s" >> "$OUT/facts.txt"
tail -3 "$OUT"/unit.log "$OUT"/integration-*.log
