"""docs/security.md's promise: anyone can check a signed package without aoti-guard. Runs the
doc's recipe (unzip + python3 + openssl pkeyutl) on a package signed by `aoti-guard sign`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import Built, run_cli

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def _recipe() -> str:
    """The bash block of docs/security.md that verifies with openssl."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S)
    (block,) = [b for b in blocks if "openssl pkeyutl -verify" in b]
    return block


def test_openssl_verifies_the_signature_as_the_doc_says(static_pkg: Built, tmp_path: Path) -> None:
    for tool in ("unzip", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (.ci/run installs it)")
    key = tmp_path / "release.key"
    assert run_cli("keygen", str(key)).returncode == 0
    pkg = tmp_path / "model.pt2"
    shutil.copyfile(static_pkg.path, pkg)
    signed = run_cli("sign", str(pkg), "--key", str(key))
    assert signed.returncode == 0, signed.stderr
    good = subprocess.run(["bash", "-euo", "pipefail", "-c", _recipe()], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert good.returncode == 0 and "Signature Verified Successfully" in good.stdout, good.stdout + good.stderr
    # the same recipe with another key must say no
    assert run_cli("keygen", str(tmp_path / "other.key")).returncode == 0
    (tmp_path / "release.key.pub").write_bytes((tmp_path / "other.key.pub").read_bytes())
    bad = subprocess.run(["bash", "-euo", "pipefail", "-c", _recipe()], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "Signature Verified Successfully" not in bad.stdout
