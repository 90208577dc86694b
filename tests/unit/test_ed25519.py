"""The pure-Python Ed25519 verifier agrees with cryptography (OpenSSL) on every key we accept.

runtime_probe verifies signatures with cryptography when it imports and with ``_ed25519``
otherwise, so the two must give the same answer: on random keys and messages, on tampered ones,
and on crafted edge cases (non-canonical S, wrong lengths, points off the curve). Where OpenSSL is
laxer (non-canonical and small-order public keys), the key loader refuses the key for both.
"""

from __future__ import annotations

import random

import pytest

from runtime_probe.trust import ed25519 as _ed25519
from runtime_probe.trust.signature import PublicKey, public_key_from_pem, verify

crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
from cryptography.exceptions import InvalidSignature  # noqa: E402

# RFC 8032, section 7.1, tests 1-3: (secret, public, message, signature)
RFC_VECTORS = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]


def openssl_verify(public: bytes, message: bytes, signature: bytes) -> bool:
    try:
        crypto.Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def both(public: bytes, message: bytes, signature: bytes) -> tuple[bool, bool]:
    return _ed25519.verify(public, message, signature), openssl_verify(public, message, signature)


def raw_public(key: object) -> bytes:
    data: bytes = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)  # type: ignore[attr-defined]
    return data


def pem_of(raw: bytes) -> bytes:
    return crypto.Ed25519PublicKey.from_public_bytes(raw).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC_VECTORS)
def test_rfc8032_vectors(secret: str, public: str, message: str, signature: str) -> None:
    pub, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    assert _ed25519.verify(pub, msg, sig)
    assert not _ed25519.verify(pub, msg + b"\0", sig)
    assert crypto.Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret)).sign(msg) == sig


def test_agrees_with_openssl_on_random_keys_messages_and_tampering() -> None:
    rng = random.Random(8032)
    for i in range(120):
        key = crypto.Ed25519PrivateKey.generate()
        public = raw_public(key)
        message = rng.randbytes(rng.choice([0, 1, 31, 32, 64, 1000, 5000]))
        signature = key.sign(message)
        assert both(public, message, signature) == (True, True), i
        # one flipped bit anywhere in the signature, the message or the key
        bit = rng.randrange(512)
        bad_sig = bytearray(signature)
        bad_sig[bit // 8] ^= 1 << (bit % 8)
        assert both(public, message, bytes(bad_sig)) == (False, False), (i, bit)
        if message:
            bad_msg = bytearray(message)
            bad_msg[rng.randrange(len(message))] ^= 1 << rng.randrange(8)
            assert both(public, bytes(bad_msg), signature) == (False, False), i
        other = raw_public(crypto.Ed25519PrivateKey.generate())
        assert both(other, message, signature) == (False, False), i


def test_both_backends_of_signature_verify_agree() -> None:
    key = crypto.Ed25519PrivateKey.generate()
    pub = PublicKey(public_key_from_pem(pem_of(raw_public(key))))
    sig = key.sign(b"manifest")
    assert verify(pub, b"manifest", sig) and verify(pub, b"manifest", sig, pure=True)
    assert not verify(pub, b"manifest!", sig) and not verify(pub, b"manifest!", sig, pure=True)


def test_non_canonical_s_is_rejected_by_both() -> None:
    key = crypto.Ed25519PrivateKey.generate()
    public, message = raw_public(key), b"release"
    signature = key.sign(message)
    s = int.from_bytes(signature[32:], "little")
    for bad_s in (s + _ed25519.L, _ed25519.L, 2**256 - 1):
        forged = signature[:32] + bad_s.to_bytes(32, "little")
        assert both(public, message, forged) == (False, False), bad_s


@pytest.mark.parametrize(("key_len", "sig_len"), [(31, 64), (33, 64), (0, 64), (32, 63), (32, 65), (32, 0)])
def test_wrong_lengths_are_rejected(key_len: int, sig_len: int) -> None:
    key = crypto.Ed25519PrivateKey.generate()
    signature = key.sign(b"m")
    public = (raw_public(key) + b"\0")[:key_len] if key_len <= 33 else b""
    sig = (signature + b"\0")[:sig_len]
    assert both(public, b"m", sig) == (False, False)
    if sig_len != 64:
        good_key = PublicKey(raw_public(key))
        assert not verify(good_key, b"m", sig) and not verify(good_key, b"m", sig, pure=True)


def test_points_off_the_curve_are_rejected_by_both() -> None:
    rng = random.Random(1)
    key = crypto.Ed25519PrivateKey.generate()
    signature = key.sign(b"m")
    off_curve = []
    while len(off_curve) < 20:
        candidate = rng.randbytes(32)
        if _ed25519.decode_point(candidate) is None:
            off_curve.append(candidate)
    for bad in off_curve:
        assert both(bad, b"m", signature) == (False, False)  # as a public key
        assert both(raw_public(key), b"m", bad + signature[32:]) == (False, False)  # as R
        with pytest.raises(ValueError, match=r"not a canonical Ed25519 point|not an Ed25519"):
            public_key_from_pem(pem_of(bad))


def test_non_canonical_r_is_rejected_by_both() -> None:
    identity = (1).to_bytes(32, "little")
    non_canonical_identity = (1 + _ed25519.P).to_bytes(32, "little")
    # with the identity as public key and S = 0, R must encode [0]B = identity
    zero = (0).to_bytes(32, "little")
    assert both(identity, b"m", identity + zero) == (True, True)
    assert both(identity, b"m", non_canonical_identity + zero) == (False, False)


def test_keys_openssl_would_accept_but_we_refuse() -> None:
    """OpenSSL reduces a non-canonical key encoding and accepts small-order keys, with which one
    forged signature verifies for every message. The key loader refuses them for both backends."""
    s = 12345
    forged = _ed25519.encode_point(_ed25519._mul(s, _ed25519._B)) + s.to_bytes(32, "little")
    identity = (1).to_bytes(32, "little")
    non_canonical = (1 + _ed25519.P).to_bytes(32, "little")
    negative_zero = (1 | (1 << 255)).to_bytes(32, "little")
    for message in (b"any", b"message"):
        assert openssl_verify(identity, message, forged)
        assert openssl_verify(non_canonical, message, forged)
        assert openssl_verify(negative_zero, message, forged)
        assert not _ed25519.verify(non_canonical, message, forged)
        assert not _ed25519.verify(negative_zero, message, forged)
    assert _ed25519.has_small_order(identity)
    with pytest.raises(ValueError, match="small-order"):
        public_key_from_pem(pem_of(identity))
    for bad in (non_canonical, negative_zero):
        with pytest.raises(ValueError, match="canonical"):
            public_key_from_pem(pem_of(bad))
    assert not _ed25519.has_small_order(raw_public(crypto.Ed25519PrivateKey.generate()))
