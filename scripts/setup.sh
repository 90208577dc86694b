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
.venv/bin/python -c "import torch, aoti_guard; print('[setup] torch', torch.__version__, '| aoti-guard', aoti_guard.__version__)"
