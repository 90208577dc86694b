"""Issue 40, finding 6: keygen and sign racing for the same files, and ``sign LINK``.

Racers are threads (each opens its own file description, so their flocks exclude each other as
separate processes' would) released together by a barrier; the slow step is slowed down further
(key generation, the signing itself) so that on code without the locks every racer overlaps every
other. A small package made without torch (tests/unit/fakepkg.py) is signed for real.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aoti_guard.pt2 import signing
from aoti_guard.pt2.signing import generate_key, load_private_key, sign_package
from runtime_probe.package.archive import open_archive
from runtime_probe.reporting.errors import GuardError, UsageError
from runtime_probe.trust.check import check_archive
from runtime_probe.trust.signature import load_public_key

from .fakepkg import make_package

pytest.importorskip("cryptography")


def _race(n: int, work: Callable[[int], Any]) -> tuple[dict[int, Any], dict[int, BaseException]]:
    """Run ``work(i)`` for i < n in threads released together; (results, errors) by i."""
    barrier = threading.Barrier(n)
    results: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a racer never finished"
    return results, errors


def _slow(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, seconds: float = 0.3) -> None:
    original = getattr(owner, name)

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, staticmethod(slow) if isinstance(owner, type) else slow)


def _public_raw(pub: Path) -> bytes:
    return load_public_key(pub).raw


def test_concurrent_keygens_one_wins_and_the_pair_matches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    _slow(monkeypatch, ed25519.Ed25519PrivateKey, "generate")
    key = tmp_path / "k"
    results, errors = _race(6, lambda i: generate_key(key))
    assert len(results) == 1, f"{len(results)} keygens said they wrote {key}"
    assert all(isinstance(e, UsageError) for e in errors.values()), errors
    assert all("wrote nothing" in e.message or "already exists" in e.message for e in errors.values() if isinstance(e, UsageError))
    (won,) = results.values()
    assert load_private_key(key).public_raw == _public_raw(tmp_path / "k.pub")
    assert won.key_id == load_private_key(key).key_id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k", "k.pub"]  # no temp file left


def test_concurrent_forced_keygens_leave_a_matching_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    _slow(monkeypatch, ed25519.Ed25519PrivateKey, "generate")
    key = tmp_path / "k"
    generate_key(key)
    results, errors = _race(4, lambda i: generate_key(key, force=True))
    assert len(results) == 1 and all(isinstance(e, UsageError) for e in errors.values()), errors
    (won,) = results.values()
    assert load_private_key(key).key_id == won.key_id and load_private_key(key).public_raw == _public_raw(tmp_path / "k.pub")


def test_keygen_over_a_public_key_that_appeared_leaves_no_half_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KEY.pub made by something other than keygen between its check and its write: the new
    private key is taken back, the stranger's file stays."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key, pub = tmp_path / "k", tmp_path / "k.pub"
    original = ed25519.Ed25519PrivateKey.generate

    def generate() -> Any:
        pub.write_bytes(b"someone else's")
        return original()

    monkeypatch.setattr(ed25519.Ed25519PrivateKey, "generate", staticmethod(generate))
    with pytest.raises(UsageError, match=r"k\.pub already exists"):
        generate_key(key)
    assert not key.exists() and pub.read_bytes() == b"someone else's"


def _keys(tmp_path: Path, n: int) -> list[signing.SigningKey]:
    out = []
    for i in range(n):
        generate_key(tmp_path / f"k{i}")
        out.append(load_private_key(tmp_path / f"k{i}"))
    return out


def _signed_by(pkg: Path, key: signing.SigningKey) -> bool:
    archive, _ = open_archive(str(pkg))
    assert archive is not None
    with archive:
        return not [f for f in check_archive(archive, key.public_key).findings if f.severity.value == "error"]


def test_concurrent_signs_never_report_a_signature_that_is_not_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _keys(tmp_path, 5)
    pkg = make_package(tmp_path / "m.pt2")
    _slow(monkeypatch, signing, "sign_manifest")
    results, errors = _race(5, lambda i: sign_package(pkg, keys[i]))
    assert len(results) == 1, f"{len(results)} signs said they signed {pkg}: {sorted(r.key_id for r in results.values())}"
    assert all(isinstance(e, UsageError) and "signed nothing" in e.message for e in errors.values()), errors
    (i,) = results
    assert _signed_by(pkg, keys[i])


def test_a_sign_after_another_finished_replaces_it_and_says_so(tmp_path: Path) -> None:
    keys = _keys(tmp_path, 2)
    pkg = make_package(tmp_path / "m.pt2")
    first = sign_package(pkg, keys[0])
    second = sign_package(pkg, keys[1])
    assert first.replaced is None and second.replaced == keys[0].key_id
    assert _signed_by(pkg, keys[1]) and not _signed_by(pkg, keys[0])


def test_sign_a_symlink_signs_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    (key,) = _keys(tmp_path, 1)
    (tmp_path / "releases").mkdir()
    target = make_package(tmp_path / "releases" / "m-1.pt2")
    link = tmp_path / "current.pt2"
    link.symlink_to(os.path.relpath(target, tmp_path))
    result = sign_package(link, key)
    assert link.is_symlink() and os.readlink(link) == os.path.relpath(target, tmp_path)
    assert result.path == os.path.realpath(link) and result.link == str(link)
    assert _signed_by(target, key)


def test_sign_a_hard_linked_package_says_the_other_names_stay_unsigned(tmp_path: Path) -> None:
    (key,) = _keys(tmp_path, 1)
    pkg = make_package(tmp_path / "m.pt2")
    os.link(pkg, tmp_path / "other.pt2")
    result = sign_package(pkg, key)
    assert _signed_by(pkg, key) and any("hard links" in n for n in result.notes)


def test_sign_a_missing_package_is_a_usage_error(tmp_path: Path) -> None:
    (key,) = _keys(tmp_path, 1)
    with pytest.raises(GuardError) as info:
        sign_package(tmp_path / "none.pt2", key)
    assert info.value.exit_code == 2
