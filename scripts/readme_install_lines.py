"""Print the README's user install lines: the ``pip install`` lines of its first bash block that
install from the checkout (``.`` or ``'.[extra]'``), comments dropped. One reader of the README's
install block for scripts/readme_install.sh and tests/unit/test_readme_install.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_INSTALL = re.compile(r"^pip install (\.|'\.\[[a-z,]+\]')(\s|$)")


def install_lines(text: str) -> list[str]:
    block = re.search(r"^```bash\n(.*?)^```", text, re.S | re.M)
    if block is None:
        return []
    lines = (line.split("#", 1)[0].strip() for line in block.group(1).splitlines())
    return [line for line in lines if _INSTALL.match(line)]


if __name__ == "__main__":
    sys.stdout.write("".join(f"{line}\n" for line in install_lines(README.read_text())))
