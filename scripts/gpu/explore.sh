#!/usr/bin/env bash
# GPU exploration: facts and raw failure outputs the probe's escalation ladder is built on.
# Run on the lent GPU machine from the repo root; writes $OUT/explore.tar.gz (OUT defaults to
# ./gpu-out). Independent jobs run in parallel (the machine has 16 cores).
set -u
OUT=${OUT:-$PWD/gpu-out}
R=$OUT/r
mkdir -p "$R"
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }

{
  date -u; nvidia-smi; nvidia-smi -L
  $PY -c "import sys, torch, triton; print(sys.version); print('torch', torch.__version__, torch.version.cuda, torch.version.git_version); print('triton', triton.__version__)"
  which cuda-gdb compute-sanitizer cuobjdump gdb g++
  g++ --version | head -1   # the compiler Inductor uses is printed below (get_cpp_compiler)
  ldconfig -p | grep -E "libstdc\+\+|libgcc_s"
  echo "--- libstdc++ mapped by python3 after import torch:"
  $PY -c "import torch; print(open('/proc/self/maps').read())" | awk '{print $6}' | grep -E "libstdc|libgcc_s" | sort -u
  $PY -c "from torch._inductor.cpp_builder import get_cpp_compiler; print('inductor cxx:', get_cpp_compiler())"
  cat /proc/driver/nvidia/version
} > "$R/facts.txt" 2>&1
. "$(dirname "$0")/cxx_runtime.sh"
echo "PRELOAD=$PRELOAD" >> "$R/facts.txt"
stamp facts

job() { local name=$1; shift; ( local s=$(date +%s); "$@" > "$R/$name.log" 2>&1; echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$R/$name.log" ) & }
job unit timeout 300 $PY -m pytest tests/unit -q -x -p no:cacheprovider
job build_cuda_nopreload timeout 420 $PY -m aoti_guard build -o "$R/ex_cuda_np.pt2" --device cuda --json "$R/build_cuda_nopreload.json"
job build_cuda timeout 420 env LD_PRELOAD="$PRELOAD" $PY -m aoti_guard build -o "$R/ex_cuda.pt2" --device cuda --json "$R/build_cuda.json"
job build_fixture timeout 420 env LD_PRELOAD="$PRELOAD" $PY -m aoti_guard build tests/gpu/models_gpu.py:example_cuda -o "$R/cuda_fixture.pt2" --no-debug-twin --device cuda --golden-max-mb 0.05
job build_cpu timeout 420 $PY -m aoti_guard build -o "$R/ex_cpu.pt2" --device cpu --no-debug-twin --json "$R/build_cpu.json"
job build_gather timeout 420 env LD_PRELOAD="$PRELOAD" $PY -m aoti_guard build tests/gpu/models_gpu.py:gather -o "$R/gather.pt2" --device cuda --json "$R/build_gather.json"
job build_nan timeout 420 env LD_PRELOAD="$PRELOAD" $PY -m aoti_guard build tests/gpu/models_gpu.py:nan_chain -o "$R/nan.pt2" --device cuda --json "$R/build_nan.json"
wait
stamp builds

PKG=$R/ex_cuda.pt2
timeout 300 $PY -m runtime_probe "$PKG" --json "$R/probe_cuda_nopreload.json" > "$R/probe_cuda_nopreload.log" 2>&1; echo "rc=$?" >> "$R/probe_cuda_nopreload.log"
timeout 300 env LD_PRELOAD="$PRELOAD" $PY -m runtime_probe "$PKG" --json "$R/probe_cuda_preload.json" > "$R/probe_cuda_preload.log" 2>&1; echo "rc=$?" >> "$R/probe_cuda_preload.log"
timeout 300 $PY -m runtime_probe "$R/ex_cpu.pt2" --json "$R/probe_cpu_nopreload.json" > "$R/probe_cpu_nopreload.log" 2>&1; echo "rc=$?" >> "$R/probe_cpu_nopreload.log"
$PY -m aoti_guard inspect "$PKG" --json > "$R/inspect_cuda.json" 2>&1
$PY -m aoti_guard inspect "$PKG" > "$R/inspect_cuda.txt" 2>&1
stamp probes

# native view of the load crash
mkdir -p "$R/so" && (cd "$R/so" && $PY -c "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1]); [open(n.rsplit('/',1)[1],'wb').write(z.read(n)) for n in z.namelist() if n.endswith('.so') and '/data/aotinductor/model/' in n]" "$PKG")
SO=$(ls "$R"/so/*.so | head -1)
{ readelf -d "$SO" | head -40; echo "--- ldd"; ldd "$SO"; } > "$R/so_deps.txt" 2>&1
LD_DEBUG=libs timeout 120 $PY -c "import torch; torch._inductor.aoti_load_package('$PKG')" > /dev/null 2> "$R/ld_debug.txt"; echo "rc=$?" >> "$R/ld_debug.txt"
grep -E "libstdc|calling init|find library=libstdc|trying file=.*libstdc" "$R/ld_debug.txt" | head -60 > "$R/ld_debug_libstdc.txt"
timeout 240 cuda-gdb -batch -ex run -ex bt -ex "info sharedlibrary" --args $PY -c "import torch; torch._inductor.aoti_load_package('$PKG')" > "$R/cuda_gdb_load.txt" 2>&1; echo "rc=$?" >> "$R/cuda_gdb_load.txt"
stamp native

timeout 600 env LD_PRELOAD="$PRELOAD" $PY scripts/gpu/explore_faults.py "$R" "$R/gather.pt2" "$R/nan.pt2" > "$R/faults.log" 2>&1
stamp faults

rm -rf "$R/so" "$R/ld_debug.txt"
ls -la "$R" > "$R/listing.txt"
# keep packages that serve as fixtures; drop the big ones
mkdir -p "$OUT/keep" && cp "$R/cuda_fixture.pt2" "$OUT/keep/" 2>/dev/null
find "$R" -name "*.pt2" -delete
tar czf "$OUT/explore.tar.gz" -C "$OUT" r keep && rm -rf "$R" "$OUT/keep"
stamp done
