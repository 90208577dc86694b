#!/usr/bin/env bash
# Build the release-pipeline image (containers/release/Dockerfile): aoti-guard + g++.
#
#   bash scripts/docker/build_release_image.sh [BASE_IMAGE] [TAG]
#   (defaults: aoti-guard/torch:2.13.0-cpu-py311, aoti-guard/release:torch-2.13.0-cpu-py311)
#
# No registry is needed: the aoti-guard wheel is built from this checkout and its other
# requirements (click; torch comes with the default base image) are fetched as wheels on the host
# into the context, installed with --no-index. g++ comes from Debian's mirror through apt inside
# the build, which needs the host's network: the engine here runs without a bridge
# (ensure_engine.sh), so the build uses `--network host`.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BASE=${1:-aoti-guard/torch:2.13.0-cpu-py311}
TAG=${2:-aoti-guard/release:torch-2.13.0-cpu-py311}
PY=${PYTHON:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=python3
export DOCKER_BUILDKIT=0   # no buildx on Debian bookworm (containers/base/NOTES.md, pitfall 2)
el() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

docker image inspect "$BASE" >/dev/null 2>&1 \
  || { echo "[build_release_image] ERROR: no image $BASE on this engine (it is never pulled)" >&2; exit 1; }
ctx=$(mktemp -d "${TMPDIR:-/tmp}/aoti-guard-release.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
T0=$(date +%s.%N)
mkdir -p "$ctx/dist" "$ctx/containers/release"
cp "$REPO/containers/release/Dockerfile" "$ctx/containers/release/Dockerfile"
# the project's wheel, built from a copy of this checkout's sources (setuptools leaves build/
# and *.egg-info next to the sources it builds: keep them out of the work tree)
mkdir -p "$ctx/src"
cp -r "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/aoti_guard" "$REPO/runtime_probe" "$ctx/src/"
find "$ctx/src" -name __pycache__ -prune -exec rm -rf {} +
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$ctx/dist" "$ctx/src" >"$ctx/pip.log" 2>&1 \
  || { cat "$ctx/pip.log" >&2; echo "[build_release_image] ERROR: pip wheel of $REPO failed" >&2; exit 1; }
CLICK=$(grep -i '^click==' "$REPO/constraints.txt" || echo click)
"$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$ctx/dist" "$CLICK" >"$ctx/pip.log" 2>&1 \
  || { cat "$ctx/pip.log" >&2; echo "[build_release_image] ERROR: pip download $CLICK failed" >&2; exit 1; }
echo "[build_release_image] wheels: $(cd "$ctx/dist" && ls | tr '\n' ' ')($(el "$T0")s)"
rm -rf "$ctx/src" "$ctx/pip.log"
if ! docker build --network host --force-rm -f "$ctx/containers/release/Dockerfile" \
  --build-arg "BASE_IMAGE=$BASE" --build-arg "PIP_INSTALL_ARGS=--no-index --find-links /tmp/aoti-guard-dist" \
  -t "$TAG" "$ctx" >"$ctx/build.log" 2>&1; then
  tail -n 30 "$ctx/build.log" >&2; echo "[build_release_image] ERROR: docker build failed" >&2; exit 1
fi
echo "[build_release_image] $TAG (FROM $BASE) in $(el "$T0")s"
