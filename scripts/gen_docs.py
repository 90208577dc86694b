"""Regenerate the generated parts of docs/: the table of finding codes (docs/findings.md).

python scripts/gen_docs.py          # rewrite
python scripts/gen_docs.py --check  # exit 1 if the file is stale (the unit tests run this)
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
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
(the check could not run at all). `severity`: the severities the code is raised with, read from
the places that raise it (`error("code", ...)`, `warning(...)`, `info(...)`; a contract error of
the guarded loader is an error; `-` where the code is built at run time, e.g. `load.crash` from the
stage); `--strict` fails on warnings too. `example fix`: the hint the first such place gives
(`…` stands for a value filled in at run time). Generated from `runtime_probe/findings.py` and
the code that raises each finding by `python scripts/gen_docs.py`; do not edit by hand.

| code | severity | meaning | example fix | exit code when an error |
| --- | --- | --- | --- | --- |
"""

_ORDER = ("error", "warning", "info")
_CONTRACT_ERRORS = ("InputContractError", "ConstantsContractError")  # always reported as errors


def _text(node: ast.expr) -> str | None:
    """A hint's text: a string, or an f-string with ``…`` for each value filled in at run time."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "…" for v in node.values)
    return None


def emissions() -> tuple[dict[str, set[str]], dict[str, str]]:
    """(severities, first hint) per code, from the calls that raise findings in both packages."""
    severities: dict[str, set[str]] = defaultdict(set)
    hints: dict[str, str] = {}
    for package in ("runtime_probe", "aoti_guard"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                    continue
                name, code = node.func.id, None
                if name in _ORDER and node.args and isinstance(node.args[0], ast.Constant):
                    code, severity = node.args[0].value, name
                elif name in _CONTRACT_ERRORS:
                    given = next((k.value for k in node.keywords if k.arg == "code"), None)
                    code, severity = (given.value if isinstance(given, ast.Constant) else None), "error"
                if not isinstance(code, str) or code not in CODES:
                    continue
                severities[code].add(severity)
                hint = next((_text(k.value) for k in node.keywords if k.arg == "hint"), None)
                if hint and code not in hints:
                    hints[code] = hint
    return severities, hints


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    severities, hints = emissions()
    rows = []
    for code, meaning in CODES.items():
        severity = ", ".join(s for s in _ORDER if s in severities.get(code, ())) or "-"
        rows.append(f"| `{code}` | {severity} | {meaning} | {_cell(hints.get(code, '-'))} | {EXIT_CODES.get(code, 1)} |")
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
