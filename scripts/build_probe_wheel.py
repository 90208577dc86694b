"""Build the zero-dependency ``runtime-probe`` wheel (runtime_probe/ alone) into a folder.

    python scripts/build_probe_wheel.py dist/        # prints the wheel's path

The package and its pyproject (packaging/runtime-probe/) are staged in a temporary folder, since
setuptools builds what lies under the project folder; the build uses this interpreter's setuptools
(no build isolation, so nothing is downloaded).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="probe-wheel-") as tmp:
        stage = Path(tmp)
        for name in ("pyproject.toml", "README.md"):
            shutil.copyfile(ROOT / "packaging" / "runtime-probe" / name, stage / name)
        shutil.copytree(ROOT / "runtime_probe", stage / "runtime_probe", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        before = set(out.glob("runtime_probe-*.whl"))
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out), str(stage)],
            check=True,
        )
    built = sorted(set(out.glob("runtime_probe-*.whl")) - before) or sorted(out.glob("runtime_probe-*.whl"))
    return built[-1]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/build_probe_wheel.py OUT_DIR")
    print(build(Path(sys.argv[1])))
