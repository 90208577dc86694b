#!/usr/bin/env bash
# Install aoti_guard_torchvision_shim into VENV when, and only when, `import torchvision` fails
# there with torchvision's own "operator torchvision::nms does not exist" (its C++ ops built for
# another torch: the index's CUDA torchvision beside a CPU torch, or a torch with no torchvision
# release yet). Idempotent. Usage: bash scripts/venv/install_torchvision_shim.sh [VENV]
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${1:-.venv}
site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
[ -f "$site/aoti_guard_torchvision_shim.pth" ] && exit 0
"$VENV/bin/python" -c "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torchvision') else 1)" || exit 0
if ! err=$("$VENV/bin/python" -c "import torchvision" 2>&1); then
  if grep -q "torchvision::nms does not exist" <<<"$err"; then
    cp scripts/venv/aoti_guard_torchvision_shim.py "$site/"
    echo "import aoti_guard_torchvision_shim" > "$site/aoti_guard_torchvision_shim.pth"
    echo "[setup] torchvision's C++ ops do not load beside this torch: installed its import shim (zoo/README.md)"
  else
    echo "$err" | tail -3 >&2; exit 1
  fi
fi
