#!/usr/bin/env bash
# GPU validation: builds the CUDA packages in parallel, then runs the GPU tests (tests/gpu, marked
# gpu) that probe them, and packs the reports for docs/gpu-validation.md.
#   run on the lent GPU machine from the repo root:  OUT=/somewhere bash scripts/gpu_validation.sh
# Writes $OUT/gpu-validation.tar.gz (reports, build logs, facts).
set -u
OUT=${OUT:-$PWD/gpu-out}
W=$OUT/w
PKGS=$W/packages
RES=$W/results
mkdir -p "$PKGS" "$RES"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }

{ date -u; nvidia-smi -L; $PY -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__, torch.cuda.device_count())"; } > "$RES/facts.txt" 2>&1
# A C++ runtime to preload where the machine needs one (AOTI-FACTS.md); the probe finds and
# verifies this remedy by itself in test_probe_of_the_cuda_build_explains_its_load.
. "$(dirname "$0")/gpu/cxx_runtime.sh"
echo "preload candidate: $PRELOAD" >> "$RES/facts.txt"

build() { local name=$1; shift; ( s=$(date +%s); env LD_PRELOAD="$PRELOAD" timeout 300 $PY -m aoti_guard build "$@" -o "$PKGS/$name.pt2" --json "$PKGS/$name.build.json" > "$RES/build_$name.log" 2>&1; echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$RES/build_$name.log" ) & }
# the CPU-side suite on this machine's torch/Python too (tests needing absent extras skip)
( s=$(date +%s); timeout 300 $PY -m pytest tests/unit -q -p no:cacheprovider -o addopts="-m 'not gpu'" > "$RES/unit.log" 2>&1; echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$RES/unit.log" ) &
build example --device cuda --no-debug-twin
build gather tests/gpu/models_gpu.py:gather --device cuda
build nan tests/gpu/models_gpu.py:nan_chain --device cuda
build nan_shared tests/gpu/models_gpu.py:nan_chain --device cuda --twin-weights shared  # tests/gpu/test_gpu_twin_weights.py
# --- issue 13 (tests/gpu/test_gpu_diagnosis.py): the build's own diagnosis, value ranges, --cuda-arch
build_nopreload() { local name=$1; shift; ( s=$(date +%s); env -u LD_PRELOAD timeout 420 $PY -m aoti_guard build "$@" -o "$PKGS/$name.pt2" --json "$PKGS/$name.build.json" > "$RES/build_$name.log" 2>&1; echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$RES/build_$name.log" ) & }
build_nopreload example_nopreload --device cuda --no-debug-twin
build masked_softmax tests/gpu/models_gpu.py:masked_softmax --device cuda
build embed tests/gpu/models_gpu.py:embed --device cuda --no-debug-twin
# --- issue 26 (tests/gpu/test_gpu_masked_twin.py): a -inf mask by design, a NaN elsewhere; no twin
# flag: the default twin shares the release weights on CUDA too
build masked_nan tests/integration/models.py:masked_nan --device cuda
CC=$($PY -c "import torch; print('%d.%d' % torch.cuda.get_device_capability(0))")
build example_arch_own --device cuda --no-debug-twin --cuda-arch "$CC"
build example_arch_80_90 --device cuda --no-debug-twin --cuda-arch 8.0,9.0
# --- end issue 13
$PY - "$PKGS" <<'PYEOF' > "$RES/inputs.log" 2>&1
import sys, torch
from runtime_probe.formats import safetensors as _safetensors
out = sys.argv[1]
table = torch.randn(4096); idx = torch.randint(0, 4096, (256,)); idx[77] = 1 << 30
_safetensors.dump({"table": table, "idx": idx}, f"{out}/gather_bad.safetensors")
x = torch.rand(8, 32) + 1.0; x[3] = -1.0
_safetensors.dump({"x": x}, f"{out}/nan_bad.safetensors")
_safetensors.dump({"x": torch.rand(8, 32) + 1.0}, f"{out}/nan_good.safetensors")
sys.path.insert(0, "tests/integration")
from models import causal_mask
x = torch.rand(2, 6, 16) + 0.5; x[0, 1, 2] = -1.0
_safetensors.dump({"x": x, "mask": causal_mask(2, 6)}, f"{out}/masked_nan_bad.safetensors")
print("inputs written")
PYEOF
wait
stamp builds
for f in "$PKGS"/*.build.json; do cp "$f" "$RES/"; done
$PY -m aoti_guard inspect "$PKGS/example.pt2" > "$RES/inspect_example.txt" 2>&1

# the GPU tests in parallel where pytest-xdist is installed (it is on the GPU machines' image)
PARALLEL=(); $PY -c "import xdist" 2>/dev/null && PARALLEL=(-n 6)
AOTI_GUARD_GPU_PKGS=$PKGS AOTI_GUARD_GPU_RESULTS=$RES AOTI_GUARD_GPU_PRELOAD=$PRELOAD \
  timeout 350 $PY -m pytest tests/gpu -m gpu -v -p no:cacheprovider "${PARALLEL[@]}" -o addopts="" > "$RES/pytest.log" 2>&1
RC=$?
echo "pytest rc=$RC" >> "$RES/pytest.log"
stamp tests
tail -15 "$RES/pytest.log"
tar czf "$OUT/gpu-validation.tar.gz" -C "$W" results && rm -rf "$W"
stamp done
exit "$RC"  # the GPU tests' verdict, after the results are packed
