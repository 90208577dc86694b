#!/usr/bin/env bash
# GPU benchmarks of the guarded loader (issue 14), separate from scripts/gpu_validation.sh:
#   run on the lent GPU machine from the repo root:  OUT=/somewhere bash scripts/gpu_bench.sh
# Builds the example for CUDA, then runs bench/guard_overhead.py, guard_paths.py,
# guard_concurrency.py and cold_start.py on it; writes $OUT/gpu-bench.tar.gz (JSON + the printed
# tables + facts) for docs/benchmarks.md. About 6 minutes. The unit suite runs beside the build
# (not beside a benchmark) on this machine's torch (results/unit.log).
set -u
OUT=${OUT:-$PWD/gpu-bench-out}
RES=$OUT/results
mkdir -p "$RES"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# the C++ runtime remedy the lent machines need to load any AOTI package (AOTI-FACTS.md)
. "$(dirname "$0")/gpu/cxx_runtime.sh"
export LD_PRELOAD=$PRELOAD
{ date -u; nvidia-smi -L; echo "LD_PRELOAD=$LD_PRELOAD"; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } > "$RES/facts.txt" 2>&1
( s=$(date +%s); timeout 300 $PY -m pytest tests/unit -q -p no:cacheprovider -o addopts="-m 'not gpu'" > "$RES/unit.log" 2>&1; echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$RES/unit.log" ) &
PKG=$OUT/example_cuda.pt2
timeout 300 $PY -m aoti_guard build -o "$PKG" --device cuda --no-debug-twin -q > "$RES/build.log" 2>&1 || { echo "build failed"; tail -20 "$RES/build.log"; exit 1; }
wait  # the unit suite overlaps the (untimed) build only, never a benchmark
tail -3 "$RES/unit.log"
run() { local name=$1; shift; timeout "$1" $PY -m "bench.$name" "${@:2}" --json "$RES/$name.json" > "$RES/$name.md" 2> "$RES/$name.log"; echo "$name rc=$?"; cat "$RES/$name.md"; }
run guard_overhead 120 --package "$PKG" --device cuda --max-wait 5
run guard_paths 120 --package "$PKG" --device cuda --max-wait 5
run guard_concurrency 150 --package "$PKG" --device cuda --rounds 3 --seconds 2 --max-wait 5
# torch's own loader (87-105 s a process here, docs/benchmarks.md) is left out: run
# scripts/gpu/cold_start_probe.sh for it (removed, last in commit 0cc60b5; docs/benchmarks.md keeps its answer). The pre-flight arm is issue 14's `--fast` goal.
run cold_start 300 --package "$PKG" --device cuda --rounds 3 --warmup 0 --max-wait 5 --arms import,direct,guard,guard-noverify,preflight
tar czf "$OUT/gpu-bench.tar.gz" -C "$OUT" results
