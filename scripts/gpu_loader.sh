#!/usr/bin/env bash
# The loader without Inductor (runtime_probe/compiled_model.py, 2026-11-26) on the lent GPU, one
# call of ~9 minutes (docs/gpu-validation.md, run 21):
#   1. scripts/gpu_validation.sh in the background: the GPU tests (every CUDA package they load goes
#      through CompiledModel now) and the unit suite on this machine's torch (2.11);
#   2. tests/integration/test_compiled_model.py and tests/unit/test_torch_compat.py on torch 2.11
#      (CompiledModel against torch's AOTICompiledModel on real packages; the compat entries);
#   3. a serving process's cold start on a CUDA package, whole processes, interleaved: torch's
#      C++ loader in torch's AOTICompiledModel (its module imports Inductor) against
#      `import runtime_probe; runtime_probe.load(...)`, each with one call.
# Run from the repo root: OUT=/somewhere bash scripts/gpu_loader.sh
set -u
OUT=${OUT:-$PWD/gpu-loader-out}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu/cxx_runtime.sh"
export LD_PRELOAD=$PRELOAD  # every AOTI package segfaults at load on these machines without it
{ date -u; nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)"; } > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
( OUT=$OUT/validation timeout 480 bash scripts/gpu_validation.sh > "$OUT/validation.log" 2>&1; echo "rc=$?" >> "$OUT/validation.log" ) &
timeout 300 $PY -m pytest -q -p no:cacheprovider -o addopts="" tests/integration/test_compiled_model.py tests/unit/test_torch_compat.py > "$OUT/compiled_model_tests.log" 2>&1
echo "tests rc=$?" >> "$OUT/compiled_model_tests.log"; tail -3 "$OUT/compiled_model_tests.log"
PKG=$OUT/example-cuda.pt2
timeout 240 $PY -m aoti_guard build --device cuda --no-debug-twin -o "$PKG" > "$OUT/build.log" 2>&1; echo "build rc=$?"
$PY - "$PKG" > "$OUT/cold_start.txt" 2>&1 <<'PYEOF'
import statistics, subprocess, sys, time
pkg = sys.argv[1]
arms = {
    "torch's AOTICompiledModel": "import torch; from torch.export.pt2_archive._package import AOTICompiledModel; "
    f"m = AOTICompiledModel(torch._C._aoti.AOTIModelPackageLoader({pkg!r}, 'model', False, 1, 0)); "
    "x = torch.randn(8, 16, device='cuda'); mask = torch.ones(8, 32, dtype=torch.bool, device='cuda'); m(x, mask); torch.cuda.synchronize()",
    "runtime_probe.load": "import torch, runtime_probe; "
    f"m = runtime_probe.load({pkg!r}); "
    "x = torch.randn(8, 16, device='cuda'); mask = torch.ones(8, 32, dtype=torch.bool, device='cuda'); m(x, mask); torch.cuda.synchronize()",
}
times = {k: [] for k in arms}
for r in range(5):
    for k in (list(arms) if r % 2 == 0 else list(arms)[::-1]):
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", arms[k]], capture_output=True, text=True)
        times[k].append(time.perf_counter() - t)
        if p.returncode:
            print(k, "failed:", p.stderr[-1500:])
for k, v in times.items():
    print(f"{k:28s} median {statistics.median(v):.2f} s  ({', '.join(f'{x:.2f}' for x in v)})")
PYEOF
cat "$OUT/cold_start.txt"
wait
tail -25 "$OUT/validation.log"
