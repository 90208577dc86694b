"""``PackageRejected`` carries its reason in the message (issue 44: a serving log showed only
"... is not a usable package", the reason was in ``.findings`` alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

import runtime_probe
from runtime_probe.reporting.errors import PackageRejected
from runtime_probe.reporting.findings import error, warning


def test_a_truncated_file_is_refused_with_its_reason_in_the_message(tmp_path: Path) -> None:
    bad = tmp_path / "model.pt2"
    bad.write_bytes(b"PK\x03\x04" + b"\x00" * 200)  # a zip's first bytes, no end record: truncated
    with pytest.raises(PackageRejected) as refused:
        runtime_probe.load(bad)
    text = str(refused.value)
    assert "is not a usable package: archive.unreadable:" in text and "end-of-archive" in text
    assert refused.value.hint and "truncated" in refused.value.hint


def test_the_first_error_is_named_and_the_rest_counted() -> None:
    findings = [
        warning("manifest.missing", "archive", "w"),
        error("archive.hash_mismatch", "archive", "a.so changed", hint="h1"),
        error("archive.unreadable", "archive", "b"),
    ]
    rejected = PackageRejected("p.pt2 is not a usable package", findings)
    assert str(rejected).startswith("p.pt2 is not a usable package: archive.hash_mismatch: a.so changed (and 1 more error(s) in .findings)")
    assert rejected.hint == "h1" and rejected.findings == findings
