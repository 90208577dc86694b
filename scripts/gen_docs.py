"""Regenerate the generated parts of docs/: the table of finding codes (docs/findings.md).

python scripts/gen_docs.py          # rewrite
python scripts/gen_docs.py --check  # exit 1 if the file is stale (the unit tests run this)
"""

from __future__ import annotations

import sys
from pathlib import Path

from runtime_probe.findings import CODES, EXIT_CODES

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "findings.md"

HEAD = """# Finding codes

Every check reports findings with a stable dotted `code`. Scripts may match on these strings: codes
are added, never renamed or reused. Each finding also carries `severity` (error, warning, info),
`phase`, `message`, `expected`, `found`, `hint` and, where there is some, `evidence` (kernel,
signal, native frames, stderr lines, errors, argument name).

An error finding makes the exit code 1, except the codes listed with another exit code below
(the check could not run at all). Generated from `runtime_probe/findings.py` by
`python scripts/gen_docs.py`; do not edit by hand.

| code | meaning | exit code when an error |
| --- | --- | --- |
"""


def render() -> str:
    rows = [f"| `{code}` | {meaning} | {EXIT_CODES.get(code, 1)} |" for code, meaning in CODES.items()]
    return HEAD + "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET} is stale: run python scripts/gen_docs.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
