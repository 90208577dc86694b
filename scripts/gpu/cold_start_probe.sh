#!/usr/bin/env bash
# Where does torch's aoti_load_package spend its cold start? (issue 14; docs/benchmarks.md)
# Builds one small CUDA package, then times each suspect in a FRESH process:
#   import torch; torch._inductor.codecache.get_device_information (the VecISA probe) with a cold
#   cache, with a warm one, and with TORCHINDUCTOR_VEC_ISA_OK=0; aoti_load_package + first call
#   (default and VEC_ISA_OK=0); the direct AOTIModelPackageLoader + first call; a cProfile of the
#   slow path; where the loader extracts the package.
#   run on the GPU machine from the repo root:  OUT=/somewhere bash scripts/gpu/cold_start_probe.sh
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; R=$OUT/cold_start.txt; : > "$R"
PY=${PY:-python3}
. "$(dirname "$0")/cxx_runtime.sh"
W=$(mktemp -d); PKG=$W/small.pt2
say() { echo "$*" | tee -a "$R"; }
say "== $(date -u) $(nvidia-smi -L | head -1)"
say "cpu flags: $(grep -o -w 'avx512[a-z_0-9]*\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
env LD_PRELOAD="$PRELOAD" $PY - "$PKG" <<'PYEOF' >> "$R" 2>&1
import sys, time, torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(64, 64)
    def forward(self, x): return torch.relu(self.lin(x)) + 1
m = M().cuda().eval(); x = torch.randn(8, 64, device="cuda")
t = time.time(); ep = torch.export.export(m, (x,))
torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[1])
print(f"built {sys.argv[1]} in {time.time() - t:.1f}s")
PYEOF
t() { local label=$1; shift; local s=$EPOCHREALTIME; "$@" >> "$R" 2>&1; local rc=$?; say "$(awk -v a="$s" -v b="$EPOCHREALTIME" -v l="$label" -v rc=$rc 'BEGIN { printf "%-58s %7.2fs rc=%s", l, b - a, rc }')"; }
C1=$(mktemp -d); C2=$(mktemp -d)
t "python -c 'import torch'" $PY -c "import torch"
t "import torch._inductor.codecache" $PY -c "import torch._inductor.codecache"
t "get_device_information(cuda), cold cache" env TORCHINDUCTOR_CACHE_DIR=$C1 $PY -c "import torch._inductor.codecache as c; c.get_device_information('cuda')"
say "  .so files written by the probe: $(find $C1 -name '*.so' | wc -l)"
t "get_device_information(cuda), warm cache" env TORCHINDUCTOR_CACHE_DIR=$C1 $PY -c "import torch._inductor.codecache as c; c.get_device_information('cuda')"
t "get_device_information(cuda), VEC_ISA_OK=0" env TORCHINDUCTOR_VEC_ISA_OK=0 TORCHINDUCTOR_CACHE_DIR=$C2 $PY -c "import torch._inductor.codecache as c; c.get_device_information('cuda')"
CALL="import torch; x = torch.randn(8, 64, device='cuda')"
t "aoti_load_package + call, cold cache" env LD_PRELOAD="$PRELOAD" TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) $PY -c "$CALL; m = torch._inductor.aoti_load_package('$PKG'); m(x); torch.cuda.synchronize()"
t "aoti_load_package + call, warm cache" env LD_PRELOAD="$PRELOAD" TORCHINDUCTOR_CACHE_DIR=$C1 $PY -c "$CALL; m = torch._inductor.aoti_load_package('$PKG'); m(x); torch.cuda.synchronize()"
t "aoti_load_package + call, VEC_ISA_OK=0, cold cache" env LD_PRELOAD="$PRELOAD" TORCHINDUCTOR_VEC_ISA_OK=0 TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) $PY -c "$CALL; m = torch._inductor.aoti_load_package('$PKG'); m(x); torch.cuda.synchronize()"
t "AOTIModelPackageLoader + call" env LD_PRELOAD="$PRELOAD" $PY -c "$CALL; L = torch._C._aoti.AOTIModelPackageLoader('$PKG', 'model', False, 1, -1); L.run([x]); torch.cuda.synchronize()"
t "runtime_probe.load + call (plain package)" env LD_PRELOAD="$PRELOAD" PYTHONPATH=$PWD $PY -c "$CALL; import runtime_probe; m = runtime_probe.load('$PKG'); m(x); torch.cuda.synchronize()"
say "== 'Loading outdated pt2' retries: $(env LD_PRELOAD="$PRELOAD" $PY -c "import torch; torch._inductor.aoti_load_package('$PKG')" 2>&1 | grep -c 'Loading outdated pt2')"
say "== cProfile of aoti_load_package, cold cache (top 25 by cumulative time)"
env LD_PRELOAD="$PRELOAD" TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) $PY -c "import cProfile, pstats, torch; cProfile.run('torch._inductor.aoti_load_package(\"$PKG\")', '$W/prof'); pstats.Stats('$W/prof').sort_stats('cumtime').print_stats(25)" 2>&1 | grep -v '^$' | head -60 >> "$R"
say "== where AOTIModelPackageLoader extracts (TMPDIR=$W/tmp)"
mkdir -p $W/tmp
env LD_PRELOAD="$PRELOAD" TMPDIR=$W/tmp $PY -c "import torch, os, glob; L = torch._C._aoti.AOTIModelPackageLoader('$PKG', 'model', False, 1, -1); print('under TMPDIR:', os.listdir('$W/tmp')); print('newest /tmp dirs:', sorted(glob.glob('/tmp/*/'), key=os.path.getmtime)[-3:])" >> "$R" 2>&1
say "== loading from an extracted directory"
mkdir -p $W/x && (cd $W/x && $PY -m zipfile -e "$PKG" .) && env LD_PRELOAD="$PRELOAD" $PY -c "import torch; L = torch._C._aoti.AOTIModelPackageLoader('$W/x', 'model', False, 1, -1); print('directory load ok')" >> "$R" 2>&1 || say "directory load failed"
rm -rf "$W" "$C1" "$C2"
cat "$R" | tail -40
