"""Property tests: whatever the bytes, the readers answer with findings (or a clean pass), never an
unhandled exception. Budget: 150 examples per property in CI (~15 s in all); set
AOTI_GUARD_HYPOTHESIS_EXAMPLES=5000 for a longer local run."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime_probe.package.archive import open_archive
from runtime_probe.package.manifest import Manifest, ManifestError, parse_manifest
from runtime_probe.reporting.findings import CODES, Finding
from runtime_probe.runtime import layout
from runtime_probe.trust.check import check_archive
from runtime_probe.trust.signature import PublicKey, SignatureFormatError, parse_signature, public_key_from_pem

from .fakepkg import make_package, manifest_dict

BUDGET = settings(
    max_examples=int(os.environ.get("AOTI_GUARD_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _good_package_bytes() -> bytes:
    with tempfile.TemporaryDirectory(prefix="aoti-guard-props-") as folder:
        return make_package(Path(folder) / "good.pt2").read_bytes()


_GOOD = _good_package_bytes()  # at import: the mutation strategy's bounds need its length
# hypothesis runs each example many times inside one test, so the scratch folder is per module
# (not tmp_path), under pytest's own temporary folder: a folder of the system's TMPDIR removed
# at exit (atexit) was left behind by every xdist worker, which does not run atexit handlers
_TMP = Path()


@pytest.fixture(autouse=True, scope="module")
def _scratch(tmp_path_factory: pytest.TempPathFactory) -> None:
    global _TMP
    _TMP = tmp_path_factory.mktemp("props")


_KEY = PublicKey(bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"))  # RFC 8032 test 1

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _check_findings(findings: Any) -> None:
    for f in findings:
        assert isinstance(f, Finding) and f.code in CODES


def _probe_archive_bytes(data: bytes) -> None:
    """What the probe's archive phase does, on ``data``: must return findings, never raise."""
    path = _TMP / "case.pt2"
    path.write_bytes(data)
    archive, findings = open_archive(path)
    _check_findings(findings)
    if archive is None:
        return
    with archive:
        for key in (None, _KEY):
            check = check_archive(archive, key)
            _check_findings(check.findings)


@BUDGET
@given(st.binary(max_size=4096))
def test_manifest_reader_any_bytes(raw: bytes) -> None:
    try:
        parse_manifest(raw)
    except ManifestError as exc:
        assert exc.code in CODES


@BUDGET
@given(st.lists(st.tuples(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4), json_values), min_size=1, max_size=4))
def test_manifest_reader_and_rules_on_mutated_manifests(edits: list[tuple[list[str], Any]]) -> None:
    """Replace random fields (at any depth, existing or new) of a valid manifest with random JSON."""
    m = copy.deepcopy(manifest_dict({"a": b"x"}))
    for path, value in edits:
        node: Any = m
        for key in path[:-1]:
            if isinstance(node, dict):
                node = node.setdefault(key, {})
            elif isinstance(node, list) and node:
                node = node[hash(key) % len(node)]
        if isinstance(node, dict):
            node[path[-1]] = value
    try:
        manifest = parse_manifest(json.dumps(m).encode())
    except ManifestError as exc:
        assert exc.code in CODES
        return
    assert isinstance(manifest, Manifest)
    pkg = make_package(_TMP / "mutated.pt2", edit=lambda d: d.update(m))
    _probe_archive_bytes(pkg.read_bytes())


@BUDGET
@given(st.binary(max_size=8192))
def test_archive_checks_any_bytes(data: bytes) -> None:
    _probe_archive_bytes(data)


@BUDGET
@given(
    st.lists(st.tuples(st.integers(min_value=0, max_value=len(_GOOD) - 1), st.integers(min_value=0, max_value=255)), max_size=8),
    st.integers(min_value=0, max_value=len(_GOOD)),
    st.binary(max_size=64),
)
def test_archive_checks_mutated_package(edits: list[tuple[int, int]], cut: int, insert: bytes) -> None:
    """A valid package with bytes overwritten, an insertion, and a truncation."""
    data = bytearray(_GOOD)
    for at, value in edits:
        data[at] = value
    blob = bytes(data[:cut]) + insert + bytes(data[cut:]) if insert else bytes(data)
    _probe_archive_bytes(blob)


@BUDGET
@given(st.binary(max_size=2048))
def test_signature_entry_any_bytes(raw: bytes) -> None:
    try:
        parse_signature(raw)
    except SignatureFormatError:
        pass


@BUDGET
@given(st.dictionaries(st.sampled_from(["format", "schema_version", "algorithm", "key_id", "manifest_sha256", "signature"]), json_values))
def test_signature_entry_any_json(doc: dict[str, Any]) -> None:
    base = {
        "format": "aoti-guard.signature",
        "schema_version": "1.0",
        "algorithm": "ed25519",
        "key_id": "k",
        "manifest_sha256": "m",
        "signature": "",
    }
    try:
        parse_signature(json.dumps({**base, **doc}).encode())
    except SignatureFormatError:
        pass
    pkg = make_package(_TMP / "signed.pt2", extra=[(layout.SIGNATURE, json.dumps({**base, **doc}).encode())])
    _probe_archive_bytes(pkg.read_bytes())


@BUDGET
@given(
    st.binary(max_size=512) | st.text(max_size=300).map(lambda t: f"-----BEGIN PUBLIC KEY-----\n{t}\n-----END PUBLIC KEY-----\n".encode())
)
def test_public_key_reader_any_bytes(data: bytes) -> None:
    try:
        raw = public_key_from_pem(data)
    except ValueError:
        return
    assert len(raw) == 32
