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
    from runtime_probe.findings import CODES

    sources = "\n".join(p.read_text() for d in ("runtime_probe", "aoti_guard") for p in (ROOT / d).rglob("*.py") if p.name != "findings.py")
    unused = [code for code in CODES if f'"{code}"' not in sources and f"'{code}'" not in sources and not _built_dynamically(code)]
    assert unused == [], unused


def _built_dynamically(code: str) -> bool:
    # f"{stage}.crash", f"{stage}.native_frames", ... are emitted by stage
    return code.split(".", 1)[1] in {"crash", "error", "timeout", "native_frames"}
