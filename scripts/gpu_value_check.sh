#!/usr/bin/env bash
# Issue 25, defect 2 on the lent GPU: what each value-check design costs, and that the default
# keeps the process and its CUDA context alive on an id past the table.
#   run on the GPU machine from the repo root:  OUT=/somewhere bash scripts/gpu_value_check.sh
# Builds bench/value_check_cost.py's embedding model for CUDA, runs the benchmark (bare, guard
# without value checks, "sync", "device" side by side), then three children on one bad id:
# the default, check_values="sync" and the opt-out (check_values=False). Writes
# $OUT/results/{facts.txt,build.log,value_check_cost.{md,json,log},survive.log} and
# $OUT/gpu-value-check.tar.gz. About 2 minutes on a warm machine.
set -u
OUT=${OUT:-$PWD/gpu-value-check-out}
RES=$OUT/results
mkdir -p "$RES"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# the C++ runtime remedy the lent machines need to load any AOTI package (docs: AOTI-FACTS.md)
. "$(dirname "$0")/gpu/cxx_runtime.sh"
export LD_PRELOAD=$PRELOAD
{ date -u; nvidia-smi -L; echo "LD_PRELOAD=$LD_PRELOAD"; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } > "$RES/facts.txt" 2>&1
cat "$RES/facts.txt"
PKG=$OUT/embedding_cuda.pt2
timeout 300 $PY -m aoti_guard build bench/value_check_cost.py:embedding -o "$PKG" --device cuda --no-debug-twin -q > "$RES/build.log" 2>&1 \
  || { echo "build failed"; tail -30 "$RES/build.log"; exit 1; }
timeout 240 $PY -m bench.value_check_cost --device cuda --package "$PKG" --rounds 30 --max-wait 5 --json "$RES/value_check_cost.json" \
  > "$RES/value_check_cost.md" 2> "$RES/value_check_cost.log"
echo "value_check_cost rc=$?"
cat "$RES/value_check_cost.md"
# one bad id per child, then a good call and a device sync: does the process (and its CUDA context) live?
for mode in default sync off; do
  echo "== check_values: $mode" >> "$RES/survive.log"
  timeout 120 $PY - "$PKG" "$mode" >> "$RES/survive.log" 2>&1 <<'EOF'
import sys, warnings
warnings.filterwarnings("ignore")
import torch, runtime_probe
from runtime_probe.reporting.errors import InputContractError
options = {"default": {}, "sync": {"check_values": "sync"}, "off": {"check_values": False}}[sys.argv[2]]
model = runtime_probe.load(sys.argv[1], **options)
print("value_mode:", model.value_mode)
ids = torch.randint(0, 1000, (8, 12), device="cuda")
bad = ids.clone()
bad[3, 5] = 5000
try:
    out = model(bad)
    torch.cuda.synchronize()
    print("bad call returned; all NaN:", bool(out.isnan().all()))
    model.raise_for_values()
    print("raise_for_values: nothing raised")
except InputContractError as exc:
    print("refused:", exc.code, exc.argument, str(exc).splitlines()[0])
except Exception as exc:
    print("raw error:", type(exc).__name__, str(exc).splitlines()[0][:200])
try:
    good = model(ids)
    torch.cuda.synchronize()
    print("next good call: ok, finite:", bool(good.isfinite().all()))
except Exception as exc:
    print("next good call failed:", type(exc).__name__, str(exc).splitlines()[0][:200])
EOF
  echo "exit $?" >> "$RES/survive.log"
done
cat "$RES/survive.log"
tar czf "$OUT/gpu-value-check.tar.gz" -C "$OUT" results
