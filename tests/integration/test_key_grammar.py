"""One way to pass the private key: ``--key KEY`` on keygen, sign and build; the older forms
(``keygen KEY``, ``build --sign-key KEY``) still work, with a deprecation warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import MODELS, march_lever, run_cli, run_probe

pytestmark = pytest.mark.integration


def test_key_flag_everywhere(tmp_path: Path) -> None:
    key = tmp_path / "release.key"
    made = run_cli("keygen", "--key", str(key))
    assert made.returncode == 0 and key.exists() and Path(f"{key}.pub").exists(), made.stderr
    assert "deprecated" not in made.stderr
    out = tmp_path / "dist" / "model.pt2"  # -o creates dist/
    built = run_cli(
        "build",
        f"{MODELS}:static",
        "-o",
        str(out),
        "--no-debug-twin",
        "--key",
        str(key),
        *(["--cpu-isa", "x86-64-v3"] if march_lever() else []),
    )
    assert built.returncode == 0, built.stderr[-3000:]
    checked = run_probe(str(out), "--verify-only", "--public-key", f"{key}.pub", "--json", "-")
    assert checked.returncode == 0 and json.loads(checked.stdout)["phases"][0]["detail"]["signature"]["key_id"], checked.stderr
    other = tmp_path / "other.key"
    old = run_cli("keygen", str(other))  # the form before --key
    assert old.returncode == 0 and "`keygen KEY` is deprecated: write keygen --key KEY" in old.stderr
    resigned = run_cli("sign", str(out), "--key", str(other))
    assert resigned.returncode == 0 and "replaced a signature" in resigned.stdout
    assert run_probe(str(out), "--verify-only", "--public-key", f"{other}.pub").returncode == 0


def test_deprecated_sign_key_and_conflicts(tmp_path: Path) -> None:
    proc = run_cli("build", "-o", str(tmp_path / "m.pt2"), "--sign-key", str(tmp_path / "missing.key"))
    assert proc.returncode == 2 and "--sign-key is deprecated: write --key KEY" in proc.stderr
    proc = run_cli("build", "-o", str(tmp_path / "m.pt2"), "--sign-key", "a.key", "--key", "b.key")
    assert proc.returncode == 2 and "name different keys" in proc.stderr
    assert run_cli("keygen").returncode == 2
    key = tmp_path / "k.key"
    report = run_cli("build", "-o", str(tmp_path / "m.pt2"), "--sign-key", str(key), "--json", str(key))
    assert report.returncode == 2 and "would overwrite the signing key" in report.stderr and not key.exists()
