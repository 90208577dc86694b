"""Generated docs stay in step with the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_findings_doc_is_current() -> None:
    proc = subprocess.run([sys.executable, "scripts/gen_docs.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_registered_code_is_used_somewhere() -> None:
    """A registered code nobody emits is dead weight (or a typo on the emitting side)."""
    from runtime_probe.reporting.findings import CODES

    sources = "\n".join(p.read_text() for d in ("runtime_probe", "aoti_guard") for p in (ROOT / d).rglob("*.py") if p.name != "findings.py")
    unused = [code for code in CODES if f'"{code}"' not in sources and f"'{code}'" not in sources and not _built_dynamically(code)]
    assert unused == [], unused


def _built_dynamically(code: str) -> bool:
    # f"{stage}.crash", f"{stage}.native_frames", ... are emitted by stage
    return code.split(".", 1)[1] in {"crash", "error", "timeout", "native_frames"}


def test_findings_doc_gives_severity_and_a_fix() -> None:
    """docs/findings.md says each code's severity and a hint to act on, read from where it is raised."""
    rows = {
        line.split("|")[1].strip(" `"): [c.strip() for c in line.split("|")[2:-1]]
        for line in (ROOT / "docs" / "findings.md").read_text().splitlines()
        if line.startswith("| `")
    }
    severity, _, fix, exit_code = rows["archive.hash_mismatch"]
    assert severity == "error" and "do not load it" in fix and exit_code == "1"
    assert rows["build.isa_beyond_baseline"][0] == "warning" and "--cpu-isa x86-64-v3" in rows["build.isa_beyond_baseline"][2]
    assert rows["input.range"][0] == "error"  # the guarded loader's contract errors
    assert sum(1 for r in rows.values() if r[0] != "-") > len(rows) * 2 // 3
