#!/usr/bin/env bash
# Regenerates the CUDA fixtures used by tests/unit/test_elf.py.
#
# CI has no CUDA toolkit: the committed files are what the tests read, and this
# script records how they were made.  The committed set was built with
#   nvcc 13.0 (V13.0.88)                    -> cu130_*.cubin, cu130_*.fatbin
#   ptxas 12.9 (V12.9.86, from PyPI          -> cu129_*.cubin (old e_flags ABI)
#     nvidia-cuda-nvcc-cu12==12.9.86)
# and cross-checked with cuobjdump/nvdisasm 13.5 (PyPI nvidia-cuda-cuobjdump,
# nvidia-cuda-nvdisasm), whose answers the tests hard-code.
#
# Usage: make_cubins.sh              (nvcc on PATH)
#   PTXAS_CU12=/path/to/ptxas-12.9    also rebuild the cu129_* cubins
#   CUOBJDUMP=/path/to/cuobjdump      print what NVIDIA's tool says of each file
#                                     (put nvdisasm on PATH for .headerflags)
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/k.cu" <<'CU'
extern "C" __global__ void k(float *x) { x[threadIdx.x] += 1.0f; }
CU

nvcc --version | tail -2
for arch in sm_80 sm_90 sm_90a sm_100a sm_100f sm_120; do
    nvcc -cubin -arch="$arch" -o "cu130_$arch.cubin" "$tmp/k.cu"
done

# Compressed (zstd) entries: names must come from the fatbin entry headers.
nvcc -fatbin -Xfatbin -compress-all \
    -gencode arch=compute_80,code=sm_80 \
    -gencode arch=compute_90a,code='[sm_90a,compute_90a]' \
    -gencode arch=compute_90,code=compute_90 \
    -gencode arch=compute_100f,code='[sm_100f,compute_100f]' \
    -gencode arch=compute_120,code='[sm_120,compute_120]' \
    -o cu130_mixed.fatbin "$tmp/k.cu"
# Uncompressed entries: the ELF entry is named from the cubin it holds.
nvcc -fatbin --no-compress \
    -gencode arch=compute_90a,code='[sm_90a,compute_90a]' \
    -gencode arch=compute_80,code=compute_80 \
    -o cu130_plain.fatbin "$tmp/k.cu"

if [[ -n "${PTXAS_CU12:-}" ]]; then
    "$PTXAS_CU12" --version | tail -2
    nvcc -ptx -arch=compute_80 -o "$tmp/k.ptx" "$tmp/k.cu"
    for arch in sm_90a sm_100a; do
        # ptxas 12.9 reads PTX ISA <= 8.8; this kernel needs nothing newer.
        sed -e 's/^\.version .*/.version 8.8/' -e "s/^\.target .*/.target $arch/" \
            "$tmp/k.ptx" >"$tmp/k_$arch.ptx"
        "$PTXAS_CU12" -arch="$arch" -o "cu129_$arch.cubin" "$tmp/k_$arch.ptx"
    done
fi

if [[ -n "${CUOBJDUMP:-}" ]]; then
    for f in *.cubin; do
        echo "$f: $("$CUOBJDUMP" -elf "$f" | grep -m1 -i 'elf:')"
    done
    for f in *.fatbin; do
        echo "== $f"
        "$CUOBJDUMP" -lelf -lptx "$f"
    done
fi
ls -l ./*.cubin ./*.fatbin
