"""``--verify-only --public-key`` names the key that verified the package (issue 44): its file and
fingerprint, in the archive phase's JSON detail and in the text report."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_probe.probe import run as probe_run
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.reporting.report import render_text

from .fakepkg import make_package


def test_verify_only_names_the_key_that_verified(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from aoti_guard.pt2.signing import generate_key, load_private_key, sign_package

    pkg = make_package(tmp_path / "m.pt2")
    keys = generate_key(tmp_path / "release.key")
    sign_package(pkg, load_private_key(keys.private))
    report = probe_run.probe(pkg, ProbeOptions(verify_only=True, public_key=keys.public))
    # (the fake package's golden records fail their own check: the signature is what is looked at)
    assert not [f for p in report.phases for f in p.findings if f.code.startswith("archive.signature")], render_text(report)
    sig = report.to_dict()["phases"][0]["detail"]["signature"]
    assert (sig["verified"], sig["key_id"], sig["key_file"]) == (True, keys.key_id, str(Path(keys.public).resolve()))
    text = render_text(report)
    assert f"signature verified with key {keys.key_id} ({Path(keys.public).resolve()})" in text, text
    # without a key nothing was verified, and the text does not say it was
    assert "signature verified" not in render_text(probe_run.probe(pkg, ProbeOptions(verify_only=True)))
