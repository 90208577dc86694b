"""Ed25519 signature verification (RFC 8032, section 5.1.7) in pure Python, standard library only.

Used when the ``cryptography`` package is not importable on the target (runtime_probe must run
with the standard library alone). Verification only: keys and signatures are made on the build
side with ``cryptography``. Not constant-time, which verification does not need (every input is
public).

For every public key ``signature.load_public_key`` accepts, it accepts exactly the signatures
OpenSSL (behind ``cryptography``) accepts; the tests check that on many random keys and messages
and on crafted rejections:
- a public key or signature of the wrong length is rejected;
- S must be canonical (S < L), as RFC 8032 requires (malleability);
- the check is cofactorless, ``encode([S]B - [k]A) == R`` byte for byte, as OpenSSL does: a
  non-canonical or off-curve R can never match an encoding computed here, so it is rejected too.
Where the two differ is the public key: this decoder rejects non-canonical encodings (y >= p,
"negative zero" x), which OpenSSL reduces and accepts. That is why ``load_public_key`` refuses such
keys (and small-order ones) before either verifier sees them.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["L", "P", "decode_point", "encode_point", "has_small_order", "verify"]

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493  # order of the base point
_D = -121665 * pow(121666, P - 2, P) % P
_SQRT_M1 = pow(2, (P - 1) // 4, P)

# Extended homogeneous coordinates (X, Y, Z, T) with x = X/Z, y = Y/Z, x*y = T/Z.
_Point = tuple[int, int, int, int]
_IDENTITY: _Point = (0, 1, 1, 0)


def _add(p: _Point, q: _Point) -> _Point:
    """Point addition (RFC 8032 5.1.4); complete, so it also doubles."""
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % P
    b = (y1 + x1) * (y2 + x2) % P
    c = 2 * t1 * t2 * _D % P
    d = 2 * z1 * z2 % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _double(p: _Point) -> _Point:
    x1, y1, z1, _ = p
    a = x1 * x1 % P
    b = y1 * y1 % P
    c = 2 * z1 * z1 % P
    h = a + b
    e = h - (x1 + y1) * (x1 + y1)
    g = a - b
    f = c + g
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _mul(scalar: int, p: _Point) -> _Point:
    q = _IDENTITY
    for bit in reversed(range(scalar.bit_length())):
        q = _double(q)
        if (scalar >> bit) & 1:
            q = _add(q, p)
    return q


def _neg(p: _Point) -> _Point:
    x, y, z, t = p
    return (-x % P, y, z, -t % P)


def _recover_x(y: int, sign: int) -> int | None:
    """The x for ``y`` with the given sign bit, or None when y is not on the curve (RFC 8032 5.1.3)."""
    if y >= P:
        return None
    u = (y * y - 1) % P
    v = (_D * y * y + 1) % P
    x = u * pow(v, 3, P) * pow(u * pow(v, 7, P), (P - 5) // 8, P) % P
    vxx = v * x * x % P
    if vxx == u:
        pass
    elif vxx == -u % P:
        x = x * _SQRT_M1 % P
    else:
        return None
    if x == 0 and sign:
        return None  # "negative zero": a second encoding of the same point
    if x & 1 != sign:
        x = P - x
    return x


def decode_point(data: bytes) -> _Point | None:
    """A 32-byte encoding -> point, or None when it is not a canonical encoding of a curve point."""
    if len(data) != 32:
        return None
    n = int.from_bytes(data, "little")
    y, sign = n & ((1 << 255) - 1), n >> 255
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % P)


def encode_point(p: _Point) -> bytes:
    x, y, z, _ = p
    zi = pow(z, P - 2, P)
    x, y = x * zi % P, y * zi % P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def has_small_order(data: bytes) -> bool:
    """True for an encoding of one of the 8 points of small order ([8]A is the identity): as a
    public key, such a point makes one signature valid for every message."""
    a = decode_point(data)
    if a is None:
        return False
    x, y, z, _ = _mul(8, a)
    return x % P == 0 and (y - z) % P == 0


_BX = 15112221349535400772501151409588531511454012693041857206046113283949847762202
_BY = 46316835694926478169428394003475163141307993866256225615783033603165251855960  # 4/5 mod p
_B: _Point = (_BX, _BY, 1, _BX * _BY % P)


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``message`` under ``public_key``."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    a = decode_point(public_key)
    if a is None:
        return False
    r_bytes, s = signature[:32], int.from_bytes(signature[32:], "little")
    if s >= L:
        return False
    k = int.from_bytes(hashlib.sha512(r_bytes + public_key + message).digest(), "little") % L
    check = _add(_mul(s, _B), _mul(k, _neg(a)))
    return hmac.compare_digest(encode_point(check), r_bytes)
