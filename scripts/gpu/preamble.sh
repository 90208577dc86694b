# Sourced first by every GPU script in scripts/gpu/: `. "$(dirname "$0")/preamble.sh" DEFAULT_OUT`.
# The one preamble they share: OUT (given, or $PWD/DEFAULT_OUT) made, PY (python3 unless given),
# the repository on PYTHONPATH, unbuffered output, HF_HUB_OFFLINE=1 (nothing can be downloaded on
# the lent machines), PRELOAD (cxx_runtime.sh: the system libstdc++ every AOTI package needs
# there), and $OUT/facts.txt printed: the date, the GPUs, the CPU count, and the
# versions of Python, torch, CUDA, triton and, where installed, transformers, onnxruntime and onnx.
# A script adds its own facts after it (e.g. compute-sanitizer's version). No commit: the device
# tool's copy of the tree carries an older HEAD than its files (run 36 printed one).
# shellcheck shell=bash
set -u
OUT=${OUT:-$PWD/${1:?"preamble.sh: give the default output folder's name"}}
mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
. "$(dirname "${BASH_SOURCE[0]}")/cxx_runtime.sh"
{
  date -u
  nvidia-smi -L
  echo "cpus: $(nproc)"
  $PY - <<'PY'
import importlib, sys
import torch
facts = [f"python {sys.version.split()[0]}", f"torch {torch.__version__}", f"cuda {torch.version.cuda}",
         f"{torch.cuda.device_count() if torch.cuda.is_available() else 0} GPUs"]
for name in ("triton", "transformers", "onnxruntime", "onnx"):
    try:
        facts.append(f"{name} {importlib.import_module(name).__version__}")
    except Exception:  # noqa: BLE001 - not installed here: left out
        pass
print(", ".join(facts))
PY
} > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
