"""Keys, signing and signature checks on torch-free packages: every outcome the probe relies on."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aoti_guard.cli import main as aoti_guard_main
from aoti_guard.pt2.signing import PASSPHRASE_ENV, generate_key, load_private_key, sign_package
from runtime_probe.package.archive import open_archive
from runtime_probe.reporting.errors import PackageRejected, UsageError
from runtime_probe.runtime import layout
from runtime_probe.trust.check import TrustCheck, check_archive
from runtime_probe.trust.signature import (
    BACKEND_ENV,
    SignatureEntry,
    SignatureFormatError,
    backend,
    load_public_key,
    parse_signature,
)

from .fakepkg import ROOT, make_package

serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
ec = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ec")


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    files = generate_key(tmp_path / "release.key")
    return Path(files.private), Path(files.public)


def trust(pkg: Path, public: Path | None) -> TrustCheck:
    archive, findings = open_archive(pkg)
    assert archive is not None and findings == []
    with archive:
        return check_archive(archive, load_public_key(public) if public else None)


def codes(check: TrustCheck) -> list[str]:
    return [f.code for f in check.findings]


def rewrite(src: Path, dst: Path, edit: Callable[[str, bytes], bytes]) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(zipfile.ZipInfo(info.filename, date_time=info.date_time), edit(info.filename, zin.read(info)))
    return dst


# -- keys


def test_keygen_writes_a_private_key_only_its_owner_can_read(keys: tuple[Path, Path]) -> None:
    private, public = keys
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in private.read_bytes() and b"BEGIN PUBLIC KEY" in public.read_bytes()
    assert load_private_key(private).key_id == load_public_key(public).key_id
    assert load_private_key(private).warnings == ()


def test_keygen_refuses_to_overwrite_without_force(keys: tuple[Path, Path]) -> None:
    private, public = keys
    before = private.read_bytes()
    with pytest.raises(UsageError, match="already exists"):
        generate_key(private)
    assert private.read_bytes() == before
    new = generate_key(private, force=True)
    assert private.read_bytes() != before and load_public_key(public).key_id == new.key_id


def test_keygen_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="looks like a public key"):
        generate_key(tmp_path / "k.pub")
    with pytest.raises(UsageError, match="does not exist"):
        generate_key(tmp_path / "missing" / "k")


def test_private_key_usage_errors(tmp_path: Path, keys: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    private, public = keys
    with pytest.raises(UsageError, match="no key file"):
        load_private_key(tmp_path / "nope")
    with pytest.raises(UsageError, match="is a public key"):
        load_private_key(public)
    (tmp_path / "junk").write_bytes(b"not a key")
    with pytest.raises(UsageError, match="not a PEM private key"):
        load_private_key(tmp_path / "junk")
    ec_key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "ec.key").write_bytes(
        ec_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    with pytest.raises(UsageError, match="Ed25519"):
        load_private_key(tmp_path / "ec.key")
    with pytest.raises(UsageError, match="folder"):
        load_private_key(tmp_path)
    private.chmod(0o644)
    assert "readable by other users" in load_private_key(private).warnings[0]


def test_encrypted_private_key_takes_its_passphrase_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    path = tmp_path / "enc.key"
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"s3cret"))
    )
    path.chmod(0o600)
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    with pytest.raises(UsageError, match="passphrase") as info:
        load_private_key(path)
    assert PASSPHRASE_ENV in str(info.value)
    monkeypatch.setenv(PASSPHRASE_ENV, "wrong")
    with pytest.raises(UsageError):
        load_private_key(path)
    monkeypatch.setenv(PASSPHRASE_ENV, "s3cret")
    assert load_private_key(path).key.public_key() == key.public_key()


def test_public_key_usage_errors(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    private, _ = keys
    with pytest.raises(UsageError, match="no public key file"):
        load_public_key(tmp_path / "nope.pub")
    with pytest.raises(UsageError, match="private key") as info:
        load_public_key(private)
    assert "BEGIN" not in str(info.value)  # never echo a secret
    ec_pub = ec.generate_private_key(ec.SECP256R1()).public_key()
    (tmp_path / "ec.pub").write_bytes(ec_pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(UsageError, match="not an Ed25519 public key"):
        load_public_key(tmp_path / "ec.pub")
    (tmp_path / "ssh.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB me@host\n")
    with pytest.raises(UsageError, match="OpenSSH"):
        load_public_key(tmp_path / "ssh.pub")
    (tmp_path / "big.pub").write_bytes(b"-" * 100_000)
    with pytest.raises(UsageError, match="not a public key file"):
        load_public_key(tmp_path / "big.pub")
    with pytest.raises(UsageError, match="folder"):
        load_public_key(tmp_path)


# -- signing and verifying


def test_sign_then_verify(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    private, public = keys
    pkg = make_package(tmp_path / "m.pt2")
    before = pkg.read_bytes()
    assert codes(trust(pkg, public)) == ["archive.signature_missing"]
    result = sign_package(pkg, load_private_key(private))
    assert result.replaced is None and result.key_id == load_public_key(public).key_id
    check = trust(pkg, public)
    assert codes(check) == [] and check.manifest is not None
    assert check.detail["signature"]["verified"] is True and check.detail["hashes_checked"] == 4
    # the first signature is appended: every record before it is byte-identical
    with zipfile.ZipFile(pkg) as zf:
        sig = zf.getinfo(f"{ROOT}/{layout.SIGNATURE}")
        assert zf.namelist()[-1] == sig.filename
    assert pkg.read_bytes()[: sig.header_offset] == before[: sig.header_offset]
    assert codes(trust(pkg, None)) == ["archive.signature_unchecked"]
    entry = parse_signature(zipfile.ZipFile(pkg).read(sig.filename))
    assert entry.algorithm == "ed25519" and len(entry.signature) == 64


def test_resigning_replaces_the_signature_and_keeps_every_entry(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    private, public = keys
    pkg = make_package(tmp_path / "m.pt2")
    sign_package(pkg, load_private_key(private))
    other = generate_key(tmp_path / "other.key")
    result = sign_package(pkg, load_private_key(other.private))
    assert result.replaced == load_public_key(public).key_id
    with zipfile.ZipFile(pkg) as zf:
        names = zf.namelist()
        contents = {n: zf.read(n) for n in names}
    assert names.count(f"{ROOT}/{layout.SIGNATURE}") == 1 and names[-1].endswith(layout.SIGNATURE)
    fresh = make_package(tmp_path / "fresh.pt2")
    with zipfile.ZipFile(fresh) as zf:
        assert {n: zf.read(n) for n in zf.namelist()} == {n: c for n, c in contents.items() if not n.endswith(layout.SIGNATURE)}
    assert codes(trust(pkg, Path(other.public))) == []
    assert codes(trust(pkg, public)) == ["archive.signature_invalid"]


def test_wrong_key_changed_manifest_and_changed_entry(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    private, public = keys
    pkg = make_package(tmp_path / "m.pt2")
    sign_package(pkg, load_private_key(private))
    other = generate_key(tmp_path / "other.key")
    wrong_key = trust(pkg, Path(other.public))
    assert codes(wrong_key) == ["archive.signature_invalid"] and "another key" in wrong_key.findings[0].message
    assert wrong_key.manifest is None and wrong_key.detail["hashes_checked"] == 0

    def edit_manifest(name: str, data: bytes) -> bytes:
        return data.replace(b'"2.13.0"', b'"2.13.1"') if name.endswith(layout.MANIFEST) else data

    changed = trust(rewrite(pkg, tmp_path / "changed.pt2", edit_manifest), public)
    assert codes(changed) == ["archive.signature_invalid"] and "changed after it was signed" in changed.findings[0].message

    def edit_so(name: str, data: bytes) -> bytes:
        return data[:-1] + bytes([data[-1] ^ 1]) if name.endswith(".so") else data

    flipped = trust(rewrite(pkg, tmp_path / "flipped.pt2", edit_so), public)
    assert codes(flipped) == ["archive.hash_mismatch"] and flipped.findings[0].evidence["entry"].endswith(".so")

    def forge(name: str, data: bytes) -> bytes:
        if not name.endswith(layout.SIGNATURE):
            return data
        entry = parse_signature(data)
        return SignatureEntry(entry.algorithm, entry.key_id, entry.manifest_sha256, bytes(64)).to_bytes()

    forged = trust(rewrite(pkg, tmp_path / "forged.pt2", forge), public)
    assert codes(forged) == ["archive.signature_invalid"] and "damaged or forged" in forged.findings[0].message


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"not json", "cannot be used"),
        (b"[]", "cannot be used"),
        (json.dumps({"format": "aoti-guard.signature"}).encode(), "cannot be used"),
        (SignatureEntry("rsa", "k", "m", b"x" * 64).to_bytes(), "algorithm 'rsa'"),
        (SignatureEntry("ed25519", "k", "m", b"x" * 64, schema_version="9.0").to_bytes(), "cannot be used"),
        (b"{" * 100_000, "cannot be used"),
    ],
)
def test_damaged_signature_entries_are_invalid(tmp_path: Path, keys: tuple[Path, Path], content: bytes, words: str) -> None:
    _, public = keys
    pkg = make_package(tmp_path / "m.pt2", extra=[(layout.SIGNATURE, content)])
    check = trust(pkg, public)
    assert codes(check) == ["archive.signature_invalid"] and words in check.findings[0].message


def test_parse_signature_only_raises_its_own_error() -> None:
    for raw in (
        b"",
        b"\xff\xfe",
        b'{"format": 1}',
        b'{"format":"aoti-guard.signature","schema_version":"1.0","algorithm":"ed25519",'
        b'"key_id":"k","manifest_sha256":"m","signature":"!!!"}',
        b"1" * 70_000,
    ):
        with pytest.raises(SignatureFormatError):
            parse_signature(raw)


def test_refuses_to_sign_a_damaged_or_plain_package(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    private, _ = keys
    key = load_private_key(private)
    bad = make_package(tmp_path / "bad.pt2", extra=[("data/aotinductor/model/added.so", b"later")])
    before = bad.read_bytes()
    with pytest.raises(PackageRejected) as info:
        sign_package(bad, key)
    assert [f.code for f in info.value.findings if f.severity.value == "error"] == ["archive.hash_mismatch"]
    assert bad.read_bytes() == before
    plain = tmp_path / "plain.pt2"
    with zipfile.ZipFile(plain, "w") as zf:
        zf.writestr("plain/data/aotinductor/model/a.so", b"x")
    with pytest.raises(PackageRejected, match="no aoti-guard manifest"):
        sign_package(plain, key)
    with pytest.raises(UsageError, match="no such package"):
        sign_package(tmp_path / "nope.pt2", key)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".aoti-guard")] == []


def test_pure_backend_can_be_forced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, keys: tuple[Path, Path]) -> None:
    private, public = keys
    assert backend() == "cryptography"
    monkeypatch.setenv(BACKEND_ENV, "pure")
    assert backend() == "pure-python"
    pkg = make_package(tmp_path / "m.pt2")
    sign_package(pkg, load_private_key(private))
    check = trust(pkg, public)
    assert codes(check) == [] and check.detail["signature"]["backend"] == "pure-python"


# -- the CLI: exit codes and messages


def test_cli_keygen_sign_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "k"
    assert aoti_guard_main(["keygen", str(key)]) == 0
    assert "key id sha256:" in capsys.readouterr().out
    assert aoti_guard_main(["keygen", str(key)]) == 2
    assert "--force" in capsys.readouterr().err
    assert aoti_guard_main(["keygen", str(key), "--force"]) == 0
    pkg = make_package(tmp_path / "m.pt2")
    assert aoti_guard_main(["sign", str(pkg), "--key", str(key)]) == 0
    assert "signed" in capsys.readouterr().out
    assert aoti_guard_main(["sign", str(pkg), "--key", f"{key}.pub"]) == 2
    assert aoti_guard_main(["sign", str(pkg), "--key", str(tmp_path / "missing")]) == 2
    assert aoti_guard_main(["sign", str(tmp_path / "missing.pt2"), "--key", str(key)]) == 2
    assert aoti_guard_main(["sign", str(pkg)]) == 2  # --key is required
    bad = make_package(tmp_path / "bad.pt2", extra=[("data/aotinductor/model/added.so", b"later")])
    assert aoti_guard_main(["sign", str(bad), "--key", str(key)]) == 1
    err = capsys.readouterr().err
    assert "archive.hash_mismatch" in err and "Traceback" not in err
    assert os.stat(key).st_mode & 0o077 == 0


def test_without_cryptography_the_pure_verifier_decides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """On a host where cryptography cannot be imported at all (not just switched off)."""
    import sys

    private, public = keys
    good = make_package(tmp_path / "good.pt2")
    sign_package(good, load_private_key(private))
    other = make_package(tmp_path / "other.pt2")
    sign_package(other, load_private_key(generate_key(tmp_path / "other.key").private))
    for name in ("cryptography", "cryptography.exceptions", "cryptography.hazmat.primitives.asymmetric.ed25519"):
        monkeypatch.setitem(sys.modules, name, None)  # any import of it now raises ImportError
    assert backend() == "pure-python"
    check = trust(good, public)
    assert codes(check) == [] and check.detail["signature"]["backend"] == "pure-python"
    assert codes(trust(other, public)) == ["archive.signature_invalid"]
