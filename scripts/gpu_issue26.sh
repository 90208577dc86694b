#!/usr/bin/env bash
# Issues 26, 27, 29 on the lent GPU (docs/gpu-validation.md, run 15), one call of ~9 minutes:
#   1. scripts/gpu_validation.sh: the GPU tests (tests/gpu: the shared CUDA twin by default, the
#      masked NaN localised past its -inf mask: test_gpu_masked_twin.py) and the unit suite on this
#      machine's torch (2.11: the torch compat module's own test included);
#   2. bench/twin_printer.py on a full-size masked decoder (opt) on CUDA: the twin's instrument
#      (asserts vs the level-2 printer), what each localises with a NaN in one weight;
#   3. golden samples at production size: resnet18 and distilbert at full size built on CUDA with
#      the default 16 MB cap, then probed: every sample the build validated is checked (whole or
#      compact), none dropped;
#   4. the fleet's node check (issue 29) on tests/data/cuda_example.pt2 (its kernels' paths were
#      scrubbed: it fails) and on the example built here: GPU probe reports kept in the repo for
#      `aoti-guard fleet report`;
#   5. the zoo (scripts/gpu_zoo.sh) for ZOO_MODELS with the bare path beside: build / bare per model.
# Run from the repo root: OUT=/somewhere PARTS="validation twin golden node zoo" bash scripts/gpu_issue26.sh
# Everything it keeps is packed into $OUT/run.tar.gz at the end (the device tool returns few files).
# Run 15, call 1: PARTS="validation twin golden node"; call 2: PARTS="validation twin node zoo".
# Run 16: PARTS="twin golden" GOLDEN_MODELS="gpt2 opt" TWIN_TIMEOUT=560 (the decoder's twin alone
# beside two builds whose reports say where validation's time goes).
set -u
FINAL=${OUT:-$PWD/gpu-issue26-out}
OUT=$FINAL/w
mkdir -p "$OUT"
PARTS=${PARTS:-validation twin golden node zoo}
has() { [[ " $PARTS " == *" $1 "* ]]; }
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
. "$(dirname "$0")/gpu/cxx_runtime.sh"
{ date -u; nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
# 1. the GPU tests and the unit suite (its own folder; packs results into a tarball)
has validation && ( OUT=$OUT/validation timeout 500 bash scripts/gpu_validation.sh > "$OUT/validation.log" 2>&1; echo "rc=$?" >> "$OUT/validation.log" ) &
# 2. the twin's instrument on a full-size masked decoder
# (each arm its own process: two full-size compiles of opt did not fit one call one after the other)
if has twin; then for arm in printer asserts+names; do
  ( LD_PRELOAD=$PRELOAD timeout ${TWIN_TIMEOUT:-520} $PY -m bench.twin_printer --model opt --size full --device cuda --arm "$arm" --keep "$OUT/twin-opt-$arm" > "$OUT/twin-opt-$arm.json" 2> "$OUT/twin-opt-$arm.err"; echo "rc=$?" >> "$OUT/twin-opt-$arm.err"; rm -f "$OUT/twin-opt-$arm"/*.pt2; rm -rf "$OUT/twin-opt-$arm"/cache-* ) &
done; fi
# 3. golden at production size
golden() { local name=$1; ( s=$(date +%s)
  LD_PRELOAD=$PRELOAD AOTI_GUARD_ZOO_SIZE=full AOTI_GUARD_ZOO_DEVICE=cuda timeout 420 $PY -m aoti_guard build "zoo/models.py:$name" --device cuda \
    -o "$OUT/$name.pt2" --json "$OUT/$name.build.json" > "$OUT/$name.build.txt" 2>&1; echo "build rc=$? seconds=$(( $(date +%s) - s ))" >> "$OUT/$name.build.txt"
  LD_PRELOAD=$PRELOAD timeout 200 $PY -m runtime_probe "$OUT/$name.pt2" --json "$OUT/$name.probe.json" > "$OUT/$name.probe.txt" 2>&1; echo "probe rc=$? seconds=$(( $(date +%s) - s ))" >> "$OUT/$name.probe.txt"
  rm -f "$OUT/$name.pt2" ) & }
if has golden; then for n in ${GOLDEN_MODELS:-resnet18 distilbert}; do golden "$n"; done; fi
# 5. the zoo: build / bare per model (gpu_zoo.sh's own deadline)
has zoo && ( OUT=$OUT/zoo JOBS=${ZOO_JOBS:-4} DEADLINE=${ZOO_DEADLINE:-470} bash scripts/gpu_zoo.sh ${ZOO_MODELS:-deberta_v2 gpt2 opt bert mobilenet_v3_small} > "$OUT/zoo.log" 2>&1 ) &
# 4. the fleet's node check: the kept CUDA example, and the example built here
if has node; then
  LD_PRELOAD=$PRELOAD timeout 200 $PY -m runtime_probe.node_check tests/data/cuda_example.pt2 --node "$(hostname)" > "$OUT/node-check-cuda-example.json" 2> "$OUT/node-check.err"
  echo "node_check rc=$?" >> "$OUT/node-check.err"
  LD_PRELOAD=$PRELOAD timeout 100 $PY -m runtime_probe.node_check tests/data/cuda_example.pt2 --node "$(hostname)" --npd > "$OUT/node-check-npd.txt" 2>&1
  echo "npd rc=$?" >> "$OUT/node-check-npd.txt"
  LD_PRELOAD=$PRELOAD timeout 240 $PY -m aoti_guard build --device cuda -o "$OUT/example.pt2" > "$OUT/example.build.txt" 2>&1
  LD_PRELOAD=$PRELOAD timeout 120 $PY -m runtime_probe.node_check "$OUT/example.pt2" --node "$(hostname)" > "$OUT/node-check-example.json" 2>> "$OUT/node-check.err"
  echo "node_check example rc=$?" >> "$OUT/node-check.err"
  rm -f "$OUT/example.pt2"
fi
stamp "node check done"
wait
stamp "all done"
tail -3 "$OUT/validation.log" 2>/dev/null
tail -n 2 "$OUT"/twin-opt-*.err 2>/dev/null
for n in ${GOLDEN_MODELS:-resnet18 distilbert}; do [ -f "$OUT/$n.build.txt" ] && { tail -1 "$OUT/$n.build.txt"; tail -1 "$OUT/$n.probe.txt"; }; done
tail -3 "$OUT/node-check.err" 2>/dev/null; cat "$OUT/node-check-npd.txt" 2>/dev/null
tail -12 "$OUT/zoo/gpu-full.md" 2>/dev/null
rm -rf "$OUT"/twin-opt-*/cache-* "$OUT"/*.pt2
tar czf "$FINAL/run.tar.gz" -C "$OUT" . && rm -rf "$OUT"
ls -la "$FINAL"
