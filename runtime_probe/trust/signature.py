"""Package signatures: the entry's format, public keys, and verification (standard library only).

What is signed: the exact bytes of the manifest entry (``extra/aoti_guard/manifest.json``). The
manifest holds the SHA-256 of every other entry, so a valid signature plus matching hashes means
every entry is the one the release pipeline built. docs/security.md has the trust model.

The signature entry (``extra/aoti_guard/manifest.sig``, UTF-8 JSON, schema MAJOR.MINOR)::

    {"format": "aoti-guard.signature", "schema_version": "1.0", "algorithm": "ed25519",
     "key_id": "sha256:<hex of the raw 32-byte public key>",
     "manifest_sha256": "<hex>", "signature": "<base64 of the 64-byte Ed25519 signature>"}

Only ``algorithm`` and ``signature`` decide anything; ``key_id`` and ``manifest_sha256`` are
unsigned hints that let a failure say *why* (another key, or a changed manifest). Bump MINOR when
adding an optional field, MAJOR when a field changes meaning; a newer MAJOR is refused.

Public keys are PEM ``PUBLIC KEY`` files (SubjectPublicKeyInfo, as ``aoti-guard keygen`` and
``openssl pkey -pubout`` write them), parsed here without ``cryptography``. Verification uses
``cryptography`` when it imports, else the pure-Python verifier in ``_ed25519`` (same answers).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

from runtime_probe.formats.numbers import NumberError, schema_version
from runtime_probe.package.archive import READ_ERRORS, Archive
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import Finding, error
from runtime_probe.runtime import layout
from runtime_probe.trust import ed25519 as _ed25519

__all__ = [
    "SIGNATURE_SCHEMA_VERSION",
    "PublicKey",
    "SignatureEntry",
    "SignatureFormatError",
    "check_signature",
    "load_public_key",
    "parse_signature",
    "public_key_from_pem",
    "read_key_file",
    "read_signature",
    "verify",
]

SIGNATURE_SCHEMA_VERSION = "1.0"
FORMAT = "aoti-guard.signature"
ALGORITHM = "ed25519"
MAX_SIGNATURE_BYTES = 64 * 1024
MAX_KEY_FILE_BYTES = 16 * 1024  # a PEM public key is ~113 bytes
PHASE = "archive"

# DER of an Ed25519 SubjectPublicKeyInfo, up to the 32 key bytes (RFC 8410: OID 1.3.101.112).
_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
# The body's whitespace is dropped after the match (public_key_from_pem): a ``\s*`` on each side of
# the lazy body made 16 KB of spaces after a BEGIN line cost seconds (every split tried again).
_PEM = re.compile(rb"-----BEGIN ([A-Z0-9 ]{1,40})-----(.*?)-----END \1-----", re.S)
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# Forces the pure-Python verifier even where cryptography imports (tests, and a way to rule the
# backend out when diagnosing). Both give the same answers.
BACKEND_ENV = "RUNTIME_PROBE_ED25519"


class SignatureFormatError(ValueError):
    """The signature entry is not a signature this reader understands."""


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key: ``raw`` is its 32-byte encoding; ``source`` where it came from."""

    raw: bytes
    source: str = ""

    @property
    def key_id(self) -> str:
        return key_id(self.raw)


def key_id(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def short_id(kid: str) -> str:
    return kid[:23] + "…" if len(kid) > 23 else kid


@dataclass(frozen=True)
class SignatureEntry:
    algorithm: str
    key_id: str
    manifest_sha256: str
    signature: bytes
    schema_version: str = SIGNATURE_SCHEMA_VERSION

    def to_bytes(self) -> bytes:
        data = {
            "format": FORMAT,
            "schema_version": self.schema_version,
            "algorithm": self.algorithm,
            "key_id": self.key_id,
            "manifest_sha256": self.manifest_sha256,
            "signature": base64.b64encode(self.signature).decode("ascii"),
        }
        return (json.dumps(data, indent=1) + "\n").encode()


def parse_signature(raw: bytes) -> SignatureEntry:
    """Parse a signature entry. Raises SignatureFormatError (never another exception type)."""
    if len(raw) > MAX_SIGNATURE_BYTES:
        raise SignatureFormatError(f"the signature entry is {len(raw)} bytes, over the {MAX_SIGNATURE_BYTES} limit")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SignatureFormatError(f"the signature entry is not JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise SignatureFormatError(f"the signature entry is a JSON {type(data).__name__}, not an object")
    fields = {k: data.get(k) for k in ("format", "schema_version", "algorithm", "key_id", "manifest_sha256", "signature")}
    bad = [k for k, v in fields.items() if not isinstance(v, str)]
    if bad:
        raise SignatureFormatError(f"the signature entry lacks string field(s) {', '.join(bad)}")
    if fields["format"] != FORMAT:
        raise SignatureFormatError(f"the signature entry's format is {str(fields['format'])[:60]!r}, not {FORMAT!r}")
    version = str(fields["schema_version"])
    try:
        major, _ = schema_version(version, "the signature entry's schema_version", SIGNATURE_SCHEMA_VERSION)
    except NumberError as exc:
        raise SignatureFormatError(str(exc)) from None
    if major > schema_version(SIGNATURE_SCHEMA_VERSION, "SIGNATURE_SCHEMA_VERSION", "1.0")[0]:
        raise SignatureFormatError(f"the signature schema {version[:20]!r} is not supported (this reader: {SIGNATURE_SCHEMA_VERSION})")
    try:
        signature = base64.b64decode(str(fields["signature"]), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureFormatError("the signature is not valid base64") from None
    return SignatureEntry(str(fields["algorithm"]), str(fields["key_id"]), str(fields["manifest_sha256"]), signature, version)


def read_signature(archive: Archive) -> SignatureEntry:
    """The package's signature entry, read under the size cap. Raises SignatureFormatError or one of
    ``archive.READ_ERRORS``."""
    return parse_signature(archive.read(layout.SIGNATURE, max_bytes=MAX_SIGNATURE_BYTES))


def read_key_file(path: str | os.PathLike[str], max_bytes: int, what: str, *, missing_hint: str | None = None) -> tuple[bytes, int]:
    """A small key file's bytes and its mode (``st_mode``). ``what`` names it in messages ("key",
    "public key").

    Raises:
        UsageError: the file is missing, a folder, unreadable, or over ``max_bytes``.
    """
    fspath = os.fspath(path)
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not hang; then only a regular file is read
        # (a FIFO, device or socket could block or never end), checked on the open descriptor.
        fd = os.open(fspath, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb", buffering=0) as fh:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError
            if not stat.S_ISREG(mode):
                raise UsageError(f"{fspath} is not a regular file (a FIFO, device or socket), so it is no {what} file", hint=missing_hint)
            data = fh.read(max_bytes + 1) or b""
    except FileNotFoundError:
        raise UsageError(f"no {what} file {fspath}", hint=missing_hint) from None
    except IsADirectoryError:
        raise UsageError(f"{fspath} is a folder, not a {what} file") from None
    except OSError as exc:
        raise UsageError(f"cannot read the {what} {fspath}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise UsageError(f"{fspath} is not a {what} file (over {max_bytes} bytes)")
    return data, mode


def public_key_from_pem(data: bytes) -> bytes:
    """The raw 32 bytes of an Ed25519 PEM ``PUBLIC KEY``. Raises ValueError saying what it is instead."""
    blocks = _PEM.findall(data)
    labels = [label.decode("ascii", "replace") for label, _ in blocks]
    if any("PRIVATE KEY" in label for label in labels) or b"PRIVATE KEY-----" in data:
        raise ValueError("it is a private key; the probe needs the public key (the .pub file keygen wrote next to it)")
    if b"ssh-ed25519 " in data[:64]:
        raise ValueError("it is an OpenSSH public key; convert it: ssh-keygen -e -m PKCS8 -f KEY.pub")
    publics = [body for label, body in blocks if label == b"PUBLIC KEY"]
    if len(publics) != 1:
        found = ", ".join(labels) or "no PEM block"
        raise ValueError(f"expected one PEM 'PUBLIC KEY' block, found {found}")
    try:
        der = base64.b64decode(re.sub(rb"\s+", b"", publics[0]), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the PEM block is not valid base64") from None
    if len(der) != len(_SPKI_PREFIX) + 32 or not der.startswith(_SPKI_PREFIX):
        raise ValueError("it is not an Ed25519 public key (another algorithm, or a damaged file)")
    raw = der[len(_SPKI_PREFIX) :]
    if _ed25519.decode_point(raw) is None:
        raise ValueError("its key bytes are not a canonical Ed25519 point")
    if _ed25519.has_small_order(raw):
        raise ValueError("it is a small-order point, which would accept forged signatures")
    return raw


def load_public_key(path: str | os.PathLike[str]) -> PublicKey:
    """Read an Ed25519 public key file (PEM). Raises UsageError saying what is wrong with it."""
    fspath = os.fspath(path)
    data, _ = read_key_file(fspath, MAX_KEY_FILE_BYTES, "public key", missing_hint="pass the KEY.pub that aoti-guard keygen wrote")
    try:
        raw = public_key_from_pem(data)
    except ValueError as exc:
        raise UsageError(
            f"{fspath} is not a usable Ed25519 public key: {exc}", hint="pass the KEY.pub that aoti-guard keygen wrote"
        ) from None
    return PublicKey(raw, fspath)


def backend() -> str:
    """Which verifier ``verify`` uses here: "cryptography" or "pure-python"."""
    return "cryptography" if _cryptography_verifier() is not None else "pure-python"


def _cryptography_verifier() -> Any:
    if os.environ.get(BACKEND_ENV) == "pure":
        return None
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except Exception:  # noqa: BLE001 - any failure to import (missing, broken cffi) means "use ours"
        return None

    def check(raw: bytes, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True

    return check


def verify(key: PublicKey, message: bytes, signature: bytes, *, pure: bool = False) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``message`` by ``key``."""
    if len(signature) != 64:
        return False
    fast = None if pure else _cryptography_verifier()
    if fast is not None:
        return bool(fast(key.raw, message, signature))
    return _ed25519.verify(key.raw, message, signature)


def check_signature(archive: Archive, manifest_bytes: bytes, key: PublicKey) -> tuple[list[Finding], dict[str, Any]]:
    """Verify the package's signature over ``manifest_bytes`` with ``key``: (findings, detail)."""
    # the key file and its fingerprint: a report that says "verified" names the key it trusted
    detail: dict[str, Any] = {"required": True, "key_id": key.key_id, "key_file": os.path.abspath(key.source) if key.source else None}
    detail["verified"] = False
    hint_key = f"the public key {os.path.basename(key.source) or 'given'} ({short_id(key.key_id)})"
    if not archive.has(layout.SIGNATURE):
        return [
            error(
                "archive.signature_missing",
                PHASE,
                f"the package is not signed, and {hint_key} requires a signature",
                expected=f"{layout.SIGNATURE} signed by {short_id(key.key_id)}",
                found="no signature entry",
                hint="use the signed release file, or sign this one: aoti-guard sign PKG --key KEY",
            )
        ], detail
    try:
        entry = read_signature(archive)
    except (SignatureFormatError, *READ_ERRORS) as exc:
        return [
            _invalid(f"the signature entry cannot be used: {str(exc)[:300]}", "a valid aoti-guard signature entry", "damaged entry")
        ], detail
    detail["signed_key_id"] = entry.key_id[:80]
    if entry.algorithm != ALGORITHM:
        return [_invalid(f"the signature uses algorithm {entry.algorithm[:40]!r}", ALGORITHM, entry.algorithm[:40])], detail
    detail["backend"] = backend()
    if verify(key, manifest_bytes, entry.signature):
        detail["verified"] = True
        return [], detail
    actual = hashlib.sha256(manifest_bytes).hexdigest()
    if entry.key_id != key.key_id and _HEX64.match(entry.key_id.removeprefix("sha256:")):
        why, expected, found = (
            f"the package was signed with another key ({short_id(entry.key_id)}), not {hint_key}",
            short_id(key.key_id),
            short_id(entry.key_id),
        )
    elif entry.manifest_sha256 != actual:
        why, expected, found = (
            "the manifest was changed after it was signed (its SHA-256 differs from the signed one)",
            f"manifest sha256 {entry.manifest_sha256[:16]}…",
            f"{actual[:16]}…",
        )
    else:
        why, expected, found = "the signature does not verify (the signature bytes are damaged or forged)", "a valid signature", "invalid"
    return [_invalid(why, expected, found)], detail


def _invalid(message: str, expected: str, found: str) -> Finding:
    return error(
        "archive.signature_invalid",
        PHASE,
        message,
        expected=expected,
        found=found,
        hint="do not load this package: it is not the one the release pipeline signed; fetch the released file again, or check you hold the right public key",
    )
