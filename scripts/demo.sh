#!/usr/bin/env bash
# The main job on the bundled example model: build it into one validated .pt2, inspect it, probe it.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out}
mkdir -p "$OUT"
.venv/bin/aoti-guard build -o "$OUT/example.pt2" --json "$OUT/build.json"
.venv/bin/aoti-guard inspect "$OUT/example.pt2"
.venv/bin/aoti-guard probe "$OUT/example.pt2" --json "$OUT/probe.json" --junit "$OUT/probe.xml"
