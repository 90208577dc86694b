#!/usr/bin/env bash
# Another torch lane (issue 27): a venv .venv-VERSION with the registry's torch VERSION (the CUDA
# build, about 5.4 GB with its libraries; it runs on CPU), aoti-guard installed into it WITH its
# dependencies, and a check that doing so left that torch where it was. Then the lane's tests.
#   bash scripts/lane.sh 2.15.0          # unit + integration + the zoo's CI subset
#   bash scripts/lane.sh 2.14.1 --smoke  # build, probe and guard-load the example, and 2 zoo models
#   bash scripts/lane.sh 2.15.0 --install-only   # the venv alone (.ci/run makes it while other work runs)
# torch and its CUDA libraries install with --no-cache-dir: pip's HTTP cache would hold a second copy
# of the ~5.4 GB (and buffers each body in TMPDIR on the way), which filled a CI machine's disk
# (2026-11-25: 'No space left on device' in the 2.15 install). A venv already made is reused.
# torchvision: the registry has a release for torch <= 2.14 only (0.29.x for 2.14). Without one
# for VERSION, the newest is installed WITHOUT its dependencies (its requirement would move torch);
# its C++ ops then do not load and zoo.models.ensure_torchvision_importable() covers the two fake
# registrations that need them: the models are torchvision's Python code (zoo/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:?usage: scripts/lane.sh TORCH_VERSION [--smoke] [pytest args...]}
shift
SMOKE=0; INSTALL_ONLY=0
case "${1:-}" in --smoke) SMOKE=1; shift ;; --install-only) INSTALL_ONLY=1; shift ;; esac
VENV=.venv-${VERSION%.*}
PYTHON=${PYTHON:-python3}
started=$(date +%s)
stamp() { echo "[lane $VERSION +$(( $(date +%s) - started ))s] $*"; }
declare -A TORCHVISION=([2.11]=0.26.0 [2.12]=0.27.1 [2.13]=0.28.0 [2.14]=0.29.2)
installed() { "$VENV/bin/python" -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null; }
# what the install below was made from: a venv that --install-only made from the same torch, the
# same dependency files and the same commit is used as it is (.ci/run installs each lane's venv
# while another lane runs; doing it all again cost each lane ~40 s, issue 41)
made_from() { echo "$VERSION $(git rev-parse HEAD 2>/dev/null) $(cat pyproject.toml constraints.txt scripts/readme_install.sh README.md | sha256sum | cut -c1-16)"; }
MARKER=$VENV/.lane-installed
if [ "$INSTALL_ONLY" = 0 ] && [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$(made_from)" ] && [ "$(installed)" = "$VERSION" ]; then
  stamp "the venv --install-only made for this commit, torch still $VERSION: used as it is"
else
rm -f "$MARKER"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir "torch==$VERSION"
[ "$(installed)" = "$VERSION" ] || { echo "lane $VERSION: the venv holds torch $(installed)" >&2; exit 1; }
stamp "torch $VERSION installed"
# the constraints without the 2.13 lane's torch and torchvision
grep -v -E '^(torch|torchvision)==' constraints.txt > "$VENV/constraints.txt"
TV=${TORCHVISION[${VERSION%.*}]:-}
if [ -n "$TV" ]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torchvision==$TV"
else
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "torchvision==${TORCHVISION[2.14]}"
fi
# first the README's own install lines as a user runs them (issue 44): they must leave this torch
bash scripts/readme_install.sh "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c "$VENV/constraints.txt" -e ".[test,dev,onnx,containers,signing,zoo]"  # the extras scripts/setup.sh installs: the same unit tests run
bash scripts/venv/install_torchvision_shim.sh "$VENV"
# the issue's promise: installing aoti-guard never moves an installed torch in 2.11..2.15
[ "$(installed)" = "$VERSION" ] || { echo "lane $VERSION: installing aoti-guard moved torch to $(installed)" >&2; exit 1; }
stamp "aoti-guard installed, torch still $VERSION"
made_from > "$MARKER"
fi
if [ "$INSTALL_ONLY" = 1 ]; then
  stamp "installed (--install-only)"
  exit 0
fi
if [ "$SMOKE" = 1 ]; then
  bash scripts/smoke.sh "$VENV"
else
  # the images of the container tests carry the 2.13 lane's torch: they run there; slurm, likewise.
  # The public-record corpus (tests/realbugs, ~8 min of builds) runs in the 2.13 lane only, for
  # CI's time; its 2.15 column: python -m tests.realbugs.report --other (docs/realbugs.md)
  SKIP_LINT=1 VENV=$VENV bash scripts/test.sh -m 'not gpu and not docker and not slurm and not realbugs' "$@"
fi
stamp "done"
