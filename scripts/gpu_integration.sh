#!/usr/bin/env bash
# The integration suite and the zoo's CI subset on the GPU machine's torch (2.11; issue 27: CI runs
# 2.13, 2.15 and a 2.14 smoke lane, so 2.11 had only the unit, GPU and zoo runs). CPU packages, as
# CI builds them; the container and Slurm tests skip there (no engine, no cluster, CI unset). The
# signing and report-schema extras that machine lacks travel as wheels in .whl (docs/gpu-validation.md
# says which): carry .whl.
#   OUT=/somewhere bash scripts/gpu_integration.sh [test paths and pytest args: default tests/integration tests/zoo]
# Each test's outcome and failure text go to $OUT/outcomes.txt as they happen (scripts/gpu/pytest_outcomes.py):
# a run killed at the call's limit still says what failed.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PY:-python3}
# the checkout on the interpreter's path as an install would put it: tests that set PYTHONPATH (the
# child-isolation tests) replace the variable, and must still find aoti_guard and runtime_probe
echo "$PWD" > "$($PY -c 'import site; print(site.getsitepackages()[0])')/aoti_guard_checkout.pth"
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD:$PWD/scripts/gpu${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OUTCOMES_LOG=$OUT/outcomes.txt
# every AOTI package segfaults at load on this machine without the system C++ runtime preloaded
# (docs/gpu-validation.md); a user there runs with it, and so does this suite
. "$(dirname "$0")/gpu/cxx_runtime.sh"
{ date -u; nvidia-smi -L; nproc; $PY -c "import sys, torch, transformers, timm, torchvision; print(sys.version.split()[0], torch.__version__, transformers.__version__, timm.__version__, torchvision.__version__)"
  command -v g++ gdb unzip openssl docker; echo "preload: $PRELOAD"; git rev-parse --short HEAD 2>/dev/null; } > "$OUT/facts.txt" 2>&1
s=$(date +%s)
LD_PRELOAD="$PRELOAD" timeout "${LIMIT:-540}" $PY -m pytest ${@:-tests/integration tests/zoo} -n "${WORKERS:-14}" --dist loadscope \
  -p no:cacheprovider -p no:benchmark -p pytest_outcomes -o addopts="-m 'not gpu'" --timeout 420 -q -rfEs --durations=15 --junitxml "$OUT/junit.xml" > "$OUT/integration.log" 2>&1
echo "rc=$? seconds=$(( $(date +%s) - s ))" >> "$OUT/integration.log"
grep -v "^\[ *[0-9]*s\] START" "$OUT/outcomes.txt" | grep -v " PASSED " | head -c 9000; tail -n 5 "$OUT/integration.log"
