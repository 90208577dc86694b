#!/usr/bin/env bash
# The smoke test of a torch lane (scripts/lane.sh VERSION --smoke): the bundled example built,
# probed and guard-loaded, then two zoo models (a CNN and a transformer) through build, probe and
# the guarded loader (zoo.parity, without the bare path). Exit 0 only when all of it passed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
PY=$VENV/bin/python
OUT=$(mktemp -d "${TMPDIR:-/tmp}/aoti-guard-smoke.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
echo "[smoke] $($PY -c 'import torch; print("torch", torch.__version__)')"
$PY -m aoti_guard build -o "$OUT/example.pt2" --json "$OUT/build.json"
$PY -m runtime_probe "$OUT/example.pt2" --json "$OUT/probe.json"
$PY - "$OUT/example.pt2" <<'PYEOF'
import sys, torch, runtime_probe
model = runtime_probe.load(sys.argv[1])
x, mask = torch.randn(3, 16), torch.ones(3, 32, dtype=torch.bool)
out = model(x, mask)
print("[smoke] guarded load: output", tuple(out.shape) if hasattr(out, "shape") else type(out).__name__)
try:
    model(torch.randn(3, 17), mask)
except runtime_probe.GuardError as exc:
    print("[smoke] guarded load refused a wrong size:", str(exc).splitlines()[0][:120])
else:
    raise SystemExit("the guarded loader accepted a wrong size")
PYEOF
PYTHONPATH=$PWD $PY -m zoo.parity resnet18 distilbert --size small --device cpu --no-bare --json "$OUT/zoo.json"
$PY - "$OUT/zoo.json" <<'PYEOF'
import json, sys
rows = json.load(open(sys.argv[1]))
rows = rows["results"]
bad = [r["name"] for r in rows if not all(r.get(s, {}).get("ok") for s in ("build", "probe", "guard"))]
print("[smoke] zoo:", ", ".join(f"{r['name']} {'ok' if r['name'] not in bad else 'FAILED'}" for r in rows))
sys.exit(1 if bad else 0)
PYEOF
echo "[smoke] passed"
