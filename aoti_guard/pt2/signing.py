"""Release keys and package signatures (the build side; needs the ``cryptography`` package).

``generate_key`` writes an Ed25519 private key (PEM PKCS#8, mode 0600) and its public key (PEM
SubjectPublicKeyInfo, ``KEY.pub``). What is signed is the exact bytes of a package's manifest
(which holds every other entry's SHA-256); the signature entry's format is defined and verified by
``runtime_probe.trust.signature``. docs/security.md has the trust model.

``sign_manifest`` signs manifest bytes in memory: the build calls it where it writes the manifest,
and appends manifest and signature together. ``sign_package`` signs a package that exists already
(``aoti-guard sign``): only after it passed its own archive checks (a safe zip, a valid manifest,
every hash matching), since signing asserts "this is what we built", so a damaged package is
refused, not blessed. The signed file is written next to the original and swapped in with
``os.replace`` only after it verified, so a failure never leaves a half-written package.

Races (issue 40): two keygens for one key, or two signs of one package, must not both say they
succeeded while one result replaced the other. keygen holds an exclusive lock on the key's folder
and takes new names with ``O_EXCL``; sign holds one on the package file (re-taken when the name
was replaced between open and lock). The locks never wait: the command that finds one held
signed or wrote nothing, and says so (exit 2). ``sign LINK`` signs the file the link names, in
place: the link stays a link.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.pt2.writer import append_entries, copy_entries, entry_info, sha256_bytes
from runtime_probe.package.archive import open_archive
from runtime_probe.reporting.errors import PackageRejected, ToolError, UsageError
from runtime_probe.reporting.escaping import for_terminal
from runtime_probe.reporting.findings import has_errors
from runtime_probe.reporting.output import write_atomic
from runtime_probe.runtime import layout
from runtime_probe.trust.check import check_archive
from runtime_probe.trust.signature import ALGORITHM, PublicKey, SignatureEntry, key_id, read_key_file, read_signature, verify

__all__ = [
    "PASSPHRASE_ENV",
    "KeyFiles",
    "SignResult",
    "SignedManifest",
    "SigningKey",
    "generate_key",
    "load_private_key",
    "sign_manifest",
    "sign_package",
]

# A passphrase for an encrypted private key comes from the environment, never from argv (which
# other users can read in ps).
PASSPHRASE_ENV = "AOTI_GUARD_KEY_PASSPHRASE"
_MAX_KEY_BYTES = 64 * 1024


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise ToolError(
            "signing needs the cryptography package, which is not installed", hint="pip install 'aoti-guard[signing]'"
        ) from None
    return serialization, ed25519


@dataclass(frozen=True)
class KeyFiles:
    private: str
    public: str
    key_id: str


@dataclass(frozen=True)
class SigningKey:
    """A loaded private key. ``warnings``: things to tell the user (a key others can read)."""

    path: str
    key: Any  # cryptography's Ed25519PrivateKey
    public_raw: bytes
    warnings: tuple[str, ...] = ()

    @property
    def key_id(self) -> str:
        return key_id(self.public_raw)

    @property
    def public_key(self) -> PublicKey:
        return PublicKey(self.public_raw, f"{self.path} (public half)")

    def sign(self, data: bytes) -> bytes:
        signature: bytes = self.key.sign(data)
        return signature


@dataclass(frozen=True)
class SignedManifest:
    """A manifest's signature: ``entry`` is the signature entry's bytes (``layout.SIGNATURE``)."""

    entry: bytes
    key_id: str
    manifest_sha256: str


@dataclass(frozen=True)
class SignResult:
    path: str  # the file that was signed (a link's target)
    key_id: str
    manifest_sha256: str
    replaced: str | None = None  # key id of the signature this one replaced
    notes: tuple[str, ...] = field(default_factory=tuple)  # things to tell the user
    link: str | None = None  # the symlink the caller named, when ``path`` is its target


@contextlib.contextmanager
def _exclusive(path: str, what: str, busy: str, hint: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (a folder, or the file itself) without waiting.

    Another aoti-guard writing the same files holds it: this one raises UsageError(``busy``)
    rather than wait and then overwrite what that one just reported. A file whose name was
    replaced between our open and our lock (a sign that just finished) is locked again under the
    inode the name names now: a lock on the old inode would guard nothing. ``what``: how a
    message names ``path`` ("package", "folder").
    """
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise UsageError(f"no such {what}: {for_terminal(path)}", hint="check the path") from None
        except OSError as exc:
            raise UsageError(f"cannot open {for_terminal(path)} to lock it: {exc.strerror}", hint="check its permissions") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(busy, hint=hint) from None
        except OSError as exc:
            os.close(fd)
            raise ToolError(
                f"cannot lock {for_terminal(path)}: {exc.strerror}", hint="use a local file system that supports flock"
            ) from None
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(path))
        except OSError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        yield
    finally:
        os.close(fd)


def generate_key(path: str | os.PathLike[str], *, force: bool = False) -> KeyFiles:
    """Write a new Ed25519 private key to ``path`` (mode 0600) and its public key to ``path.pub``.

    Raises:
        UsageError: ``path`` names a .pub file, its folder is missing or not writable, or a key is
            there already (without ``force``).
    """
    serialization, ed25519 = _crypto()
    private_path = os.fspath(path)
    public_path = private_path + ".pub"
    if private_path.endswith(".pub"):
        raise UsageError(
            f"{private_path} looks like a public key name", hint="name the private key (e.g. release.key); its public key goes to KEY.pub"
        )
    folder = os.path.dirname(os.path.abspath(private_path))
    if not os.path.isdir(folder):
        raise UsageError(f"folder {folder} does not exist", hint="create it first")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write in {folder}", hint="choose a writable folder for the key")
    busy = f"another aoti-guard keygen is writing a key in {for_terminal(folder)} right now: this one wrote nothing"
    with _exclusive(
        folder, "folder", busy, hint="run one keygen per key; if you meant to replace that key, rerun with --force once it is done"
    ):
        if not force:
            for existing in (private_path, public_path):
                if os.path.lexists(existing):
                    raise _exists(existing)
        key = ed25519.Ed25519PrivateKey.generate()
        private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        public_pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        public_raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        # Each via a temp file with its mode set before the first byte: the private key is never
        # readable by others, not even briefly. Without --force each name must be new (O_EXCL): a
        # writer that is not a keygen (and so takes no lock) cannot be overwritten either, and
        # the pair is only ever this run's.
        try:
            write_atomic(private_path, private_pem, mode=0o600, exclusive=not force)
        except FileExistsError:
            raise _exists(private_path) from None
        try:
            write_atomic(public_path, public_pem, mode=0o644, exclusive=not force)
        except BaseException as exc:
            if not force:  # the private key is this run's: never leave half a pair
                _unlink(private_path)
            if isinstance(exc, FileExistsError):
                raise _exists(public_path) from None
            raise
    return KeyFiles(private_path, public_path, key_id(public_raw))


def _exists(path: str) -> UsageError:
    return UsageError(
        f"{for_terminal(path)} already exists",
        hint="pass --force to replace it (packages signed with the old key will no longer verify with the new KEY.pub)",
    )


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def load_private_key(path: str | os.PathLike[str]) -> SigningKey:
    """Read an Ed25519 private key (PEM). Raises UsageError saying what is wrong with the file."""
    serialization, ed25519 = _crypto()
    fspath = os.fspath(path)
    data, mode = read_key_file(fspath, _MAX_KEY_BYTES, "key", missing_hint="create one with: aoti-guard keygen --key KEY")
    if b"PRIVATE KEY-----" not in data:
        if b"PUBLIC KEY-----" in data:
            raise UsageError(
                f"{fspath} is a public key; signing needs the private key",
                hint=f"pass the file keygen wrote without .pub ({fspath.removesuffix('.pub')})",
            )
        raise UsageError(f"{fspath} is not a PEM private key", hint="create one with: aoti-guard keygen --key KEY")
    passphrase = os.environ.get(PASSPHRASE_ENV)
    try:
        key = serialization.load_pem_private_key(data, password=passphrase.encode() if passphrase else None)
    except TypeError:
        # cryptography: "Password was not given but private key is encrypted" (or the reverse)
        hint = f"set {PASSPHRASE_ENV} to its passphrase" if not passphrase else f"the key is not encrypted: unset {PASSPHRASE_ENV}"
        raise UsageError(f"{fspath} cannot be opened without the right passphrase setting", hint=hint) from None
    except ValueError as exc:
        raise UsageError(f"{fspath} is not a usable private key: {str(exc)[:200]}", hint=f"a wrong {PASSPHRASE_ENV}?") from None
    except Exception as exc:  # noqa: BLE001 - cryptography's UnsupportedAlgorithm and friends
        raise UsageError(f"{fspath} is not a usable private key: {type(exc).__name__}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise UsageError(
            f"{fspath} is a {type(key).__name__.removesuffix('PrivateKey') or 'non-Ed25519'} key",
            hint="aoti-guard signs with Ed25519 keys: aoti-guard keygen --key KEY",
        )
    warnings: tuple[str, ...] = ()
    if stat.S_IMODE(mode) & 0o077:
        warnings = (f"{fspath} is readable by other users (mode {stat.S_IMODE(mode):04o}): chmod 600 {fspath}",)
    public_raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return SigningKey(fspath, key, public_raw, warnings)


def sign_manifest(manifest_bytes: bytes, key: SigningKey) -> SignedManifest:
    """Sign these exact manifest bytes, in memory. The signature is checked with the key's public
    half before it is returned (no package entry is read).

    Raises:
        ToolError: the signature does not verify (a bug).
    """
    signature = key.sign(manifest_bytes)
    if not verify(key.public_key, manifest_bytes, signature):
        raise ToolError("the new signature does not verify with the key's public half (a bug in aoti-guard)")
    digest = sha256_bytes(manifest_bytes)
    return SignedManifest(SignatureEntry(ALGORITHM, key.key_id, digest, signature).to_bytes(), key.key_id, digest)


def sign_package(path: str | os.PathLike[str], key: SigningKey) -> SignResult:
    """Sign the package at ``path`` in place (replacing an earlier signature). A symlink is
    followed: the file it names is signed and replaced, the link stays as it was.

    Raises:
        UsageError: no such file, its folder is not writable, or another sign is signing it now.
        PackageRejected: the package fails its own archive checks (``.findings`` says which).
        ToolError: the signed file did not verify (a bug) or could not be written.
    """
    given = os.fspath(path)
    # `sign LINK`: os.replace over the link would put a signed copy where the link was and leave
    # the release it names unsigned; the target is what the user means to ship
    link = given if os.path.islink(given) else None
    target = os.path.realpath(given) if link else given
    busy = f"another aoti-guard sign is signing {for_terminal(target)} right now: this one signed nothing"
    with _exclusive(
        target, "package", busy, hint="sign a package from one job; rerun this one once that one is done to replace its signature"
    ):
        return _sign_locked(target, key, link)


def _sign_locked(fspath: str, key: SigningKey, link: str | None) -> SignResult:
    """``sign_package`` while its lock is held: nothing else that signs can replace ``fspath``."""
    archive, findings = open_archive(fspath)  # UsageError for a missing file
    if archive is None:
        raise PackageRejected(f"refusing to sign {fspath}: it is not a usable package", findings)
    with archive:
        trust = check_archive(archive)
        problems = [*findings, *trust.findings]
        if has_errors(problems):
            raise PackageRejected(
                f"refusing to sign {fspath}: it fails its own archive checks", problems, hint="rebuild it; never sign a damaged package"
            )
        if trust.manifest is None:
            raise PackageRejected(
                f"refusing to sign {fspath}: it has no aoti-guard manifest to sign", problems, hint="build it with aoti-guard build"
            )
        manifest_bytes = archive.read(layout.MANIFEST, max_bytes=archive.entries[layout.MANIFEST].size)
        root = archive.root
        replaced = None
        if archive.has(layout.SIGNATURE):
            try:
                replaced = read_signature(archive).key_id
            except ValueError:
                replaced = "an unreadable signature"
    signed = sign_manifest(manifest_bytes, key)
    folder = os.path.dirname(os.path.abspath(fspath))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".aoti-guard-sign-", suffix=".pt2", dir=folder)
    except OSError as exc:
        raise UsageError(f"cannot write next to {fspath}: {exc.strerror}", hint="sign a copy in a writable folder") from None
    os.close(fd)
    notes: tuple[str, ...] = ()
    try:
        _write_signed(fspath, tmp, f"{root}/{layout.SIGNATURE}", signed.entry, replace=replaced is not None)
        _verify_written(tmp, key)
        before = os.stat(fspath)
        os.chmod(tmp, stat.S_IMODE(before.st_mode))
        if before.st_nlink > 1:  # os.replace gives this name a new file; the other names keep the old one
            notes = (f"{fspath} had {before.st_nlink - 1} other name(s) (hard links): they still name the unsigned file",)
        os.replace(tmp, fspath)
    except OSError as exc:
        _unlink(tmp)
        raise ToolError(f"writing the signed package failed: {exc.strerror or exc}", hint="check free disk space and permissions") from None
    except BaseException:
        _unlink(tmp)
        raise
    return SignResult(fspath, key.key_id, signed.manifest_sha256, replaced, notes, link)


def _write_signed(src: str, dst: str, sig_name: str, entry: bytes, *, replace: bool) -> None:
    """``dst`` = ``src`` plus the signature entry. Unsigned: a byte copy with one entry appended
    (every existing record stays byte-identical). Signed: every entry but the old signature is
    copied with its name, date, attributes and bytes, then the new signature is appended."""
    if not replace:
        shutil.copyfile(src, dst)
        append_entries(dst, [(layout.SIGNATURE, entry)])
        return
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED, allowZip64=True) as zout:
        copy_entries(src, zout, skip=(sig_name,))
        zout.writestr(entry_info(sig_name), entry)


def _verify_written(path: str, key: SigningKey) -> None:
    """The signed file must pass exactly what the probe will check, with this key's public half."""
    archive, findings = open_archive(path)
    if archive is None:
        raise ToolError("the signed package is not a readable archive (a bug in aoti-guard)")
    with archive:
        trust = check_archive(archive, key.public_key)
    bad = [f for f in (*findings, *trust.findings) if f.severity.value == "error"]
    if bad:
        raise ToolError(f"the signed package does not verify: {bad[0].code}: {bad[0].message} (a bug in aoti-guard)")
