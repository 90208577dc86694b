#!/usr/bin/env bash
# Build the pre-flight image: containers/preflight/Dockerfile on top of a serving image.
#
#   bash scripts/docker/build_preflight_image.sh [BASE_IMAGE] [TAG]
#   (defaults: aoti-guard/torch:2.13.0-cpu-py311, aoti-guard/preflight:torch-2.13.0-cpu-py311)
#
# The context is a temporary folder holding only the Dockerfile and runtime_probe's sources (no
# .venv, no caches), so the build sends a few hundred KB. The base image must be on the engine
# (never pulled: --pull is not passed and no registry is reachable here). Rebuilding with the
# same sources is a cache hit (~1 s).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BASE=${1:-aoti-guard/torch:2.13.0-cpu-py311}
TAG=${2:-aoti-guard/preflight:torch-2.13.0-cpu-py311}
export DOCKER_BUILDKIT=0   # no buildx on Debian bookworm (containers/base/NOTES.md, pitfall 2)

docker image inspect "$BASE" >/dev/null 2>&1 \
  || { echo "[build_preflight_image] ERROR: no image $BASE on this engine (it is never pulled)" >&2; exit 1; }
ctx=$(mktemp -d "${TMPDIR:-/tmp}/aoti-guard-preflight.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/containers/preflight"
# the whole package tree (subpackages and schemas/), without bytecode caches
(cd "$REPO" && tar -cf - --exclude=__pycache__ --exclude='*.pyc' runtime_probe) | tar -xf - -C "$ctx"
cp "$REPO/containers/preflight/Dockerfile" "$ctx/containers/preflight/Dockerfile"
T0=$(date +%s.%N)
docker build -q --network none --force-rm -f "$ctx/containers/preflight/Dockerfile" \
  --build-arg "BASE_IMAGE=$BASE" -t "$TAG" "$ctx" >/dev/null
echo "[build_preflight_image] $TAG (FROM $BASE) in $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
