"""The README's install lines (issue 44): a team's venv keeps its torch. scripts/readme_install.sh
runs exactly these lines in the 2.15 and 2.14 lanes' venvs (torch already there) and fails if torch
moved; here, that the lines it runs are the README's and carry nothing that pins torch."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from readme_install_lines import install_lines  # noqa: E402


def test_the_readme_installs_the_package_and_every_user_extra() -> None:
    lines = install_lines((ROOT / "README.md").read_text())
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert lines[0] == "pip install ."
    assert {"onnx", "signing", "containers"} <= extras
    assert [f"pip install '.[{extra}]'" for extra in ("onnx", "signing", "containers")] == lines[1:]


def test_no_install_line_pins_torch_or_passes_the_development_constraints() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme[: readme.index("pip wheel --no-deps")]
    for line in block.splitlines():
        if line.startswith("pip install"):
            assert "constraints" not in line and "-c " not in line and "torch" not in line.split("#")[0], line


def test_the_lane_runs_the_readme_lines_before_its_own_installs() -> None:
    lane = (ROOT / "scripts" / "lane.sh").read_text()
    assert lane.index('bash scripts/readme_install.sh "$VENV"') < lane.index('-c "$VENV/constraints.txt" -e')
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "readme_install_lines.py")], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == install_lines((ROOT / "README.md").read_text())


def test_the_signing_extra_says_what_needs_it() -> None:
    """Issue 44: the README said signing works without ``cryptography``; keygen then exited 3.
    keygen and sign need it; verifying does not (runtime_probe's pure-Python verifier)."""
    readme = (ROOT / "README.md").read_text()
    (line,) = [x for x in readme.splitlines() if x.startswith("pip install '.[signing]'")]
    comment = line.split("#", 1)[1]
    assert "keygen and sign" in comment and "works without" not in comment
