#!/usr/bin/env bash
# The project's test command (README, .ci/run): lint, types, then every test tier this machine
# can run. GPU tests are deselected (pyproject addopts: -m 'not gpu'); they run on the GPU
# machine through scripts/gpu_validation.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
echo "[test] ruff";  ruff check aoti_guard runtime_probe tests bench scripts zoo
echo "[test] ruff format"; ruff format --check aoti_guard runtime_probe tests bench scripts zoo
echo "[test] mypy";  mypy
echo "[test] pytest"
python -m pytest "$@"
