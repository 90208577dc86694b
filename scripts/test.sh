#!/usr/bin/env bash
# The project's test command (README, .ci/run): lint, types, then every test tier this machine
# can run, two tests at a time (pytest-xdist; packages are built once per run and shared between
# the workers: tests/integration/conftest.py). GPU tests are deselected (pyproject addopts:
# -m 'not gpu'); they run on the GPU machine through scripts/gpu_validation.sh.
#   VENV=.venv-2.15 bash scripts/test.sh -m 'not gpu and not docker'   # another torch lane (scripts/lane.sh)
# Arguments go to pytest. WORKERS (default 2) sets how many tests run at once.
#   bash scripts/test.sh --quick    # the inner loop: lint, types, then only the tests marked quick
#                                   # (unit + integration on a few session packages: tests/conftest.py),
#                                   # no zoo, docker, slurm; aim: 5 minutes on a quiet 2-core machine (docs/benchmarks.md)
set -euo pipefail
cd "$(dirname "$0")/.."
tier=()
if [ "${1:-}" = --quick ]; then
  shift
  tier=(-m "quick and not gpu")
fi
VENV=${VENV:-.venv}
export PATH="$PWD/$VENV/bin:$PATH"
started=$(date +%s)
if [ "${SKIP_LINT:-0}" != 1 ]; then
  echo "[test] ruff";  ruff check aoti_guard runtime_probe tests bench scripts zoo
  echo "[test] ruff format"; ruff format --check aoti_guard runtime_probe tests bench scripts zoo
  echo "[test] mypy";  mypy
fi
echo "[test] pytest ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'), ${WORKERS:-2} workers)"
python -m pytest -n "${WORKERS:-2}" --dist loadscope --durations=25 ${tier[@]+"${tier[@]}"} "$@"
echo "[test] done in $(( $(date +%s) - started ))s"
