#!/usr/bin/env bash
# The removal of a dead child's package copy (runtime_probe/child/extractions.py) on the GPU
# machine's torch: 2.11's loader extracts a package to /tmp/XXXXXX whatever TMPDIR says, and there
# every AOTI package segfaults at the .so's dlopen unless the system C++ runtime is preloaded, so a
# child that dies inside the load is the common case there (docs/compat.md, "Known differences on 2.11").
#   0. a CUDA package built with the preload, as a user there must;
#   1. control: torch alone loads it in a process WITHOUT the preload: it dies at the dlopen, and
#      the copy it extracted stays in /tmp;
#   2. `aoti-guard probe` of it without the preload: its load child dies the same way (then the
#      ladder's children); what the probe names, and which copies are left in /tmp when it ends;
#   3. tests/integration/test_worker.py + tests/unit/test_extractions.py with the preload (a child
#      SIGKILLed with its model loaded, one dying inside the load, a clean close).
# Run from the repo root: OUT=/somewhere bash scripts/gpu_leftovers.sh
set -u
OUT=${OUT:-$PWD/gpu-leftovers-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu/cxx_runtime.sh"
{ date -u; nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"
  echo "preload: $PRELOAD"; git rev-parse --short HEAD 2>/dev/null; } > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
# the folders a loader makes: mkdtemp's six characters, directly in /tmp, written since a moment
made_since() { find /tmp -maxdepth 1 -mindepth 1 -type d -newermt "@$1" -regextype posix-extended -regex '/tmp/[A-Za-z0-9]{6}' | sort; }
show() { echo "$1: $(made_since "$2" | tr '\n' ' ')"; for d in $(made_since "$2"); do du -sh "$d" | tr '\n' ' '; ls "$d" | head -3 | tr '\n' ' '; echo; done; }

# 0. the package
LD_PRELOAD=$PRELOAD timeout 240 $PY -m aoti_guard build --device cuda --no-debug-twin -o "$OUT/ex.pt2" \
  --json "$OUT/build.json" > "$OUT/build.txt" 2>&1
echo "build rc=$?"; tail -n 2 "$OUT/build.txt"

# 1. control: torch alone, no preload
t=$(date +%s); sleep 1
env -u LD_PRELOAD timeout 120 $PY -c "import sys, torch; torch._inductor.aoti_load_package(sys.argv[1]); print('loaded')" \
  "$OUT/ex.pt2" > "$OUT/control.txt" 2>&1
echo "control (torch alone, no preload) rc=$?"; tail -n 2 "$OUT/control.txt"
show "control left" "$t"
made_since "$t" | xargs -r rm -rf

# 2. aoti-guard probe, no preload
t=$(date +%s); sleep 1
env -u LD_PRELOAD timeout 300 $PY -m aoti_guard probe "$OUT/ex.pt2" --json "$OUT/probe.json" > "$OUT/probe.txt" 2>&1
echo "probe (no preload) rc=$?"; grep -v '^\[' "$OUT/probe.txt" | head -n 30
show "probe left" "$t"

# 3. the worker's tests, with the preload
t=$(date +%s); sleep 1
LD_PRELOAD=$PRELOAD timeout 300 $PY -m pytest tests/integration/test_worker.py tests/unit/test_extractions.py -q \
  -p no:cacheprovider -o addopts="" > "$OUT/pytest.txt" 2>&1
echo "pytest rc=$?"; tail -n 4 "$OUT/pytest.txt"
show "the tests left" "$t"
rm -f "$OUT"/*.pt2
