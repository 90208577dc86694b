#!/usr/bin/env bash
# Install aoti-guard into VENV with the README's own install lines, AS WRITTEN there (the `pip
# install` lines of its first bash block that install from the checkout), then fail if that moved
# the torch the venv already had (issue 44: the README's install once downgraded a team's 2.15).
# scripts/lane.sh runs it in the 2.15 and 2.14 venvs; tests/unit/test_readme_install.py checks that
# it runs exactly the README's lines.
#   bash scripts/readme_install.sh .venv-2.15
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:?usage: scripts/readme_install.sh VENV}
installed() { "$VENV/bin/python" -c "import torch; print(torch.__version__)" 2>/dev/null || echo none; }
before=$(installed)
mapfile -t lines < <(python3 scripts/readme_install_lines.py)
[ ${#lines[@]} -gt 0 ] || { echo "readme_install: no install line found in README.md" >&2; exit 1; }
for line in "${lines[@]}"; do
  echo "[readme-install] $line"
  # the venv's pip, as a user who activated it would run the line
  PATH="$PWD/$VENV/bin:$PATH" PIP_DISABLE_PIP_VERSION_CHECK=1 bash -c "$line" > "$VENV/readme-install.log" 2>&1 || {
    tail -20 "$VENV/readme-install.log" >&2; echo "readme_install: '$line' failed" >&2; exit 1; }
done
after=$(installed)
if [ "$before" != "$after" ]; then
  echo "readme_install: the README's install moved torch from $before to $after" >&2
  exit 1
fi
echo "[readme-install] torch $after unmoved by the README's ${#lines[@]} install lines"
