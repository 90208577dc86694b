# Sourced by the GPU scripts (scripts/gpu_*.sh, scripts/gpu/*.sh): PRELOAD, the system C++ runtime
# that every AOTI package needs preloaded on the lent GPU machines, or it segfaults at the .so's
# dlopen (docs/gpu-validation.md; the probe names it env.cxx_runtime_mismatch and checks the remedy).
# shellcheck shell=bash
PRELOAD=$(ldconfig -p | grep -m1 'libstdc++.so.6 (libc6,x86-64)' | awk '{print $NF}')
