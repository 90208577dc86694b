"""Deciding whether an opened archive may be trusted: signature, manifest, hashes — in that order.

The probe's archive phase and the guarded loader both call ``check_archive``. The order matters:
with a public key, the signature is checked over the manifest's exact bytes *before* the manifest
is parsed or its hashes are believed (an unsigned or forged manifest could list any hashes), then
the manifest's own rules, then every entry's SHA-256. A failed step stops the steps that would
trust it. Nothing here opens native code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.package.archive import READ_ERRORS, Archive, check_hashes
from runtime_probe.package.manifest import MAX_MANIFEST_BYTES, Manifest, ManifestError, parse_manifest
from runtime_probe.package.manifest_rules import check_manifest
from runtime_probe.reporting.findings import Finding, error, has_errors, info, warning
from runtime_probe.runtime import layout
from runtime_probe.trust.signature import PublicKey, check_signature, read_signature, short_id

__all__ = ["TrustCheck", "check_archive"]

PHASE = "archive"


@dataclass(frozen=True)
class TrustCheck:
    """The manifest when it could be read and trusted, the findings, and what was checked."""

    manifest: Manifest | None
    findings: tuple[Finding, ...]
    detail: Mapping[str, Any] = field(default_factory=dict)


def check_archive(archive: Archive, public_key: PublicKey | None = None, *, verify_hashes: bool = True) -> TrustCheck:
    """Check signature (when ``public_key`` is given), manifest and hashes of an opened archive."""
    findings: list[Finding] = []
    detail: dict[str, Any] = {}
    if not archive.has(layout.MANIFEST):
        return TrustCheck(None, tuple(_no_manifest(archive, public_key, verify_hashes=verify_hashes)), detail)
    try:
        raw = archive.read(layout.MANIFEST, max_bytes=MAX_MANIFEST_BYTES)
    except READ_ERRORS as exc:
        findings.append(error("manifest.invalid", PHASE, f"the manifest cannot be read: {str(exc)[:300]}", hint="rebuild the package"))
        return TrustCheck(None, tuple(findings), detail)

    if public_key is not None:
        sig_findings, detail["signature"] = check_signature(archive, raw, public_key)
        if has_errors(sig_findings):
            # An untrusted manifest is not even parsed: its hashes would prove nothing.
            detail["hashes_checked"] = 0
            return TrustCheck(None, tuple(findings + sig_findings), detail)
    elif archive.has(layout.SIGNATURE):
        findings.append(_unchecked(archive))

    try:
        manifest = parse_manifest(raw)
    except ManifestError as exc:
        findings.append(_unparsed(exc))
        return TrustCheck(None, tuple(findings), detail)
    rules = check_manifest(manifest, archive)
    if rules:
        return TrustCheck(None, tuple(findings + rules), detail)
    if verify_hashes:
        findings += check_hashes(archive, manifest.hashes)
        detail["hashes_checked"] = len(manifest.hashes)
    return TrustCheck(manifest, tuple(findings), detail)


def _no_manifest(archive: Archive, public_key: PublicKey | None, *, verify_hashes: bool) -> list[Finding]:
    """A plain AOTI package: nothing in it is signed, only generic checks run (its CRCs stand in
    for the hashes it does not have)."""
    findings: list[Finding] = []
    if public_key is not None:
        findings.append(
            error(
                "archive.signature_missing",
                PHASE,
                "the package has no aoti-guard manifest, so nothing in it is signed",
                expected=f"a manifest signed by {short_id(public_key.key_id)}",
                found="a plain AOTI package",
                hint="use the package aoti-guard build --key produced, or sign this one: aoti-guard sign PKG --key KEY",
            )
        )
    findings.append(
        warning(
            "manifest.missing",
            PHASE,
            "no aoti-guard manifest: a plain AOTI package; only generic checks run",
            hint="build it with aoti-guard build to get contract, hash and golden checks",
        )
    )
    if verify_hashes:
        findings += archive.check_readable()  # no hashes: CRCs are what is left to check
    return findings


def _unparsed(exc: ManifestError) -> Finding:
    """A manifest the parser refuses."""
    return error(
        exc.code,
        PHASE,
        str(exc),
        found=exc.found,
        hint="the manifest was damaged or written by a newer aoti-guard; rebuild or upgrade runtime_probe",
    )


def _unchecked(archive: Archive) -> Finding:
    signer = "an unknown key"
    try:
        signer = short_id(read_signature(archive).key_id[:80])
    except (*READ_ERRORS, ValueError):
        pass
    return info(
        "archive.signature_unchecked",
        PHASE,
        f"the package is signed (by {signer}) but no public key was given: the signature was not checked",
        hint="pass --public-key KEY.pub to require it",
    )
