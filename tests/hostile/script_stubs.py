"""Run the scripts ``aoti-guard fleet slurm`` writes under bash, with stub Slurm and system commands.

The stubs record how they were called (``STUB_LOG``) and answer like the real commands where the
scripts read them: ``scontrol show hostnames`` lists the nodes, ``sbatch --parsable`` prints a job
id, ``scontrol update`` refuses ``STUB_BAD_NODE`` (a misspelt node), ``hostname -s`` prints
``STUB_NODE``, ``python3`` records its argv and exits ``STUB_PY_RC``. A payload in a hostile
value leaves a file named ``PWNED`` (``touch PWNED``) wherever it ran: ``payloads_ran`` finds it.
Used by tests/unit/test_fleet_slurm.py and the attack pass (tests/hostile/attacks/scripts.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["MARKER", "argv_of", "calls", "payloads_ran", "run_script", "stub_bin"]

MARKER = "PWNED"
JOB_ID = "4242"

_STUBS = {
    "hostname": 'echo "${STUB_NODE:-node01}"',
    "logger": 'printf "%s\\n" "$*" >> "$STUB_LOG/logger"',
    "sbatch": f'printf "%s\\0" "$@" > "$STUB_LOG/sbatch.argv"; echo "sbatch $*" >> "$STUB_LOG/calls"; echo {JOB_ID}',
    "scontrol": """echo "scontrol $*" >> "$STUB_LOG/calls"
case "$1" in
  show) printf '%s\\n' "$3" | tr , '\\n' ;;
  update) if [ -n "${STUB_BAD_NODE:-}" ] && [ "$3" = "ReqNodeList=$STUB_BAD_NODE" ]; then
            echo "scontrol: error: Invalid node name specified" >&2; exit 1; fi ;;
esac
exit 0""",
    "scancel": 'echo "scancel $*" >> "$STUB_LOG/calls"',
    "sinfo": 'echo "node01 h100"',
    "python3": 'printf "%s\\0" "$@" > "$STUB_LOG/python.argv"; exit "${STUB_PY_RC:-0}"',
}


def stub_bin(folder: Path) -> Path:
    """Write the stub commands into ``folder/bin`` (and make ``folder/log``); returns ``folder``."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (folder / "log").mkdir(exist_ok=True)
    for name, body in _STUBS.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(0o755)
    return folder


def run_script(script: Path, stubs: Path, cwd: Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """``bash script`` with the stubs first on PATH, in ``cwd``; ``env`` sets STUB_* (or anything)."""
    cwd.mkdir(parents=True, exist_ok=True)
    full = {**os.environ, "PATH": f"{stubs / 'bin'}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(stubs / "log"), **env}
    return subprocess.run(["bash", str(script)], cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)


def argv_of(stubs: Path, command: str) -> list[str]:
    """The argv the stub ``command`` (python or sbatch) was last run with; [] if it was not."""
    path = stubs / "log" / f"{command}.argv"
    return path.read_text().split("\0")[:-1] if path.exists() else []


def calls(stubs: Path) -> list[str]:
    """Every Slurm command the scripts ran, in order (``scontrol update ...``, ``scancel 4242``)."""
    path = stubs / "log" / "calls"
    return path.read_text().splitlines() if path.exists() else []


def payloads_ran(root: Path) -> list[Path]:
    """Files a payload left under ``root`` (``touch PWNED`` ran there)."""
    return sorted(p for p in root.rglob(MARKER) if p.is_file())
