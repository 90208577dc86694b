#!/usr/bin/env bash
# Create .venv and install aoti-guard with everything its tests need, pinned by constraints.txt.
# Idempotent: a second run only checks what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
echo "[setup] installing aoti-guard and its test dependencies (constraints.txt)"
.venv/bin/python -m pip install -q -c constraints.txt -e ".[test,dev,onnx,containers,signing,zoo]"
# The index's torchvision is a CUDA build; beside the CPU torch its C++ ops do not load and
# `import torchvision` (so every transformers model) fails. The venv gets a start-up shim that
# defines the two schemas torchvision's Python code needs (scripts/venv/aoti_guard_torchvision_shim.py,
# zoo/README.md) when, and only when, the venv pairs those two builds.
bash scripts/venv/install_torchvision_shim.sh .venv
.venv/bin/python -c "import torch, aoti_guard; print('[setup] torch', torch.__version__, '| aoti-guard', aoti_guard.__version__)"
.venv/bin/python -c "import torchvision, timm, transformers; from transformers import DistilBertModel; print('[setup] model libraries import: torchvision', torchvision.__version__, '| timm', timm.__version__, '| transformers', transformers.__version__)"
