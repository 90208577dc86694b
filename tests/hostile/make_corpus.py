"""Generate the hostile-input corpus from one real package: every case is made by code, here.

``make_corpus(source, out_dir, keys)`` writes one file per case into ``out_dir`` and returns the
cases with what the probe must answer: exit code 1 and at least one of ``expect`` among its error
findings. Groups: truncated zips, flipped bytes (raw, so the CRC breaks, and rewritten, so only
the hash can tell), unsafe names, zip structure (bombs, prepended/trailing bytes, overlaps),
manifests (not JSON, wrong types, huge, deep, schema 99, NaN), signatures (with --public-key),
and weights files (--weights) that are truncated or whose header lies.

    python -m tests.hostile.make_corpus PKG OUT_DIR     # writes the files and lists the cases
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime_probe.runtime import layout

from . import corpus_cli, corpus_manifest, corpus_zip, zipcraft

__all__ = ["Case", "Keys", "make_corpus"]


@dataclass(frozen=True)
class Case:
    name: str
    group: str
    path: Path
    expect: frozenset[str]  # at least one of these error codes must be reported
    args: tuple[str, ...] = ()  # extra probe arguments (--public-key, --weights)
    needs_child: bool = False  # the failure comes after the package loaded (weights)
    what: str = ""
    exit_code: int = 1  # 2 for the command-line cases (a usage error)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "path": str(self.path),
            "expect": sorted(self.expect),
            "args": list(self.args),
            "needs_child": self.needs_child,
            "what": self.what,
            "exit_code": self.exit_code,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        return cls(
            d["name"],
            d["group"],
            Path(d["path"]),
            frozenset(d["expect"]),
            tuple(d["args"]),
            d["needs_child"],
            d["what"],
            d.get("exit_code", 1),
        )


@dataclass(frozen=True)
class Keys:
    private: Path
    public: Path
    other_private: Path
    other_public: Path


@dataclass
class _Corpus:
    source: Path
    out: Path
    keys: Keys | None
    data: bytes = b""
    root: str = ""
    cases: list[Case] = field(default_factory=list)

    def add(
        self,
        name: str,
        group: str,
        content: bytes | Path,
        expect: set[str] | str,
        what: str,
        args: tuple[str, ...] = (),
        *,
        exit_code: int = 1,
    ) -> Path:
        """A case whose package is ``content``: bytes, or a file made under ``out`` (moved)."""
        path = self.out / f"{name}.pt2"
        if isinstance(content, Path):
            shutil.move(str(content), path)
        else:
            path.write_bytes(content)
        return self.add_existing(name, group, path, expect, what, args, exit_code=exit_code)

    def add_existing(
        self, name: str, group: str, path: Path, expect: set[str] | str, what: str, args: tuple[str, ...] = (), *, exit_code: int = 1
    ) -> Path:
        """``expect`` empty: no report can be written (its path is what the case refuses)."""
        codes = frozenset({expect} if isinstance(expect, str) else expect)
        needs_child = "--weights" in args and exit_code == 1
        self.cases.append(Case(name, group, path, codes, args, needs_child=needs_child, what=what, exit_code=exit_code))
        return path


def entries(path: Path) -> list[tuple[zipfile.ZipInfo, bytes]]:
    with zipfile.ZipFile(path) as zf:
        return [(i, zf.read(i)) for i in zf.infolist()]


def rewrite(src: Path, dst: Path, edit: Callable[[str, bytes], list[tuple[str, bytes]] | bytes | None]) -> Path:
    """Copy ``src`` entry by entry; ``edit(name, data)`` returns new data, a list of (name, data)
    to write instead, or None to drop the entry. CRCs stay consistent."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate names some cases write
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
            for info, data in entries(src):
                result = edit(info.filename, data)
                items = result if isinstance(result, list) else [] if result is None else [(info.filename, result)]
                for name, content in items:
                    zout.writestr(zipfile.ZipInfo(name, date_time=info.date_time), content)
    return dst


def data_span(blob: bytes, info: zipfile.ZipInfo) -> tuple[int, int]:
    """(offset, size) of an entry's stored bytes in the file."""
    off = info.header_offset
    name_len, extra_len = struct.unpack("<2H", blob[off + 26 : off + 30])
    return off + 30 + name_len + extra_len, info.compress_size


def flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x5A]) + blob[at + 1 :]


# Entry kinds of an AOTI package, by how their name ends (relative to the root).
KINDS = {
    "so": ".wrapper.so",
    "wrapper-cpp": ".wrapper.cpp",
    "kernel-cpp": ".kernel.cpp",
    "aoti-metadata": "_metadata.json",
    "archive-format": "archive_format",
    "archive-version": "archive_version",
    "data-version": ".data/version",
    "byteorder": "byteorder",
    "serialization-id": ".data/serialization_id",
    "golden": layout.GOLDEN,
    "manifest": layout.MANIFEST,
}


def _central_records(blob: bytes) -> list[int]:
    eocd = blob.rfind(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack("<2L", blob[eocd + 12 : eocd + 20])
    out, pos = [], cd_offset
    while pos < cd_offset + cd_size:
        out.append(pos)
        name_len, extra_len, comment_len = struct.unpack("<3H", blob[pos + 28 : pos + 34])
        pos += 46 + name_len + extra_len + comment_len
    return out


def _truncated(c: _Corpus) -> None:
    size = len(c.data)
    cuts = {"empty": 0, "1-byte": 1, "21-bytes": 21, "100-bytes": 100, "minus-1": size - 1, "minus-22": size - 22, "minus-23": size - 23}
    cuts.update({f"{p}pct": size * p // 100 for p in (5, 10, 25, 50, 75, 90, 99)})
    for label, cut in cuts.items():
        c.add(
            f"truncated-{label}", "truncated", c.data[:cut], {"archive.unreadable", "archive.ambiguous"}, f"the first {cut} of {size} bytes"
        )


def _flipped(c: _Corpus, signed: Path | None) -> None:
    infos = [i for i, _ in entries(c.source)]
    for kind, suffix in KINDS.items():
        info = next((i for i in infos if i.filename.endswith(suffix)), None)
        if info is None or info.file_size == 0:
            continue
        start, size = data_span(c.data, info)
        raw_expect = {"archive.unreadable", "manifest.invalid"}
        c.add(
            f"flipped-raw-{kind}",
            "flipped byte",
            flip(c.data, start + size // 2),
            raw_expect,
            f"one byte of {suffix} flipped in place (CRC no longer matches)",
        )

        def change(name: str, data: bytes, suffix: str = suffix) -> bytes:
            if not name.endswith(suffix) or not data:
                return data
            at = len(data) // 2
            if suffix == layout.MANIFEST:  # keep it JSON: change a digit of a hash
                at = data.index(b'"hashes"') + 80
                at = next(i for i in range(at, len(data)) if data[i : i + 1] in b"0123456789abcdef")
                return data[:at] + (b"0" if data[at : at + 1] != b"0" else b"1") + data[at + 1 :]
            return data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :]

        expect = {"archive.hash_mismatch"} if kind != "manifest" else {"archive.hash_mismatch", "manifest.invalid"}
        c.add(
            f"flipped-{kind}",
            "flipped byte",
            rewrite(c.source, c.out / "tmp.pt2", change),
            expect,
            f"one byte of {suffix} changed, CRC recomputed",
        )
    # the zip's own structures
    records = _central_records(c.data)
    c.add(
        "flipped-central-size",
        "flipped byte",
        flip(c.data, records[-1] + 20),
        {"archive.unreadable", "archive.ambiguous", "manifest.invalid"},
        "the stored size of the last entry in the central directory",
    )
    c.add(
        "flipped-central-offset",
        "flipped byte",
        flip(c.data, records[0] + 42),
        {"archive.ambiguous", "archive.unreadable"},
        "the first entry's local header offset",
    )
    first = infos[0]
    c.add(
        "flipped-local-name",
        "flipped byte",
        flip(c.data, first.header_offset + 30 + 3),
        "archive.ambiguous",
        "a byte of a local header's name",
    )
    if signed is not None and c.keys is not None:
        blob = signed.read_bytes()
        sig = next(i for i, _ in entries(signed) if i.filename.endswith(layout.SIGNATURE))
        start, size = data_span(blob, sig)
        pub = ("--public-key", str(c.keys.public))
        c.add(
            "flipped-raw-signature",
            "flipped byte",
            flip(blob, start + size // 2),
            "archive.signature_invalid",
            "a byte of the signature entry",
            pub,
        )


def _names(c: _Corpus) -> None:
    root = c.root
    so = next(i.filename for i, _ in entries(c.source) if i.filename.endswith(".wrapper.so"))

    def adding(*extra: tuple[str, bytes]) -> Callable[[str, bytes], list[tuple[str, bytes]]]:
        def edit(name: str, data: bytes) -> list[tuple[str, bytes]]:
            return [(name, data), *extra] if name.endswith("archive_format") else [(name, data)]

        return edit

    unsafe = {
        "dotdot": (f"{root}/../evil.so", "a '..' component"),
        "dotdot-deep": (f"{root}/data/aotinductor/model/../../../../tmp/evil.so", "'..' climbing out of the root"),
        "absolute": ("/etc/cron.d/evil", "an absolute path"),
        "drive-letter": ("C:/evil.so", "a Windows drive"),
        "backslash": (f"{root}\\..\\evil.so", "backslashes"),
        "dot-component": (f"{root}/./data/aotinductor/model/x.so", "a '.' component"),
        "empty-component": (f"{root}//x.so", "an empty component"),
        "second-root": ("other/data/aotinductor/model/x.so", "an entry outside the root folder"),
        "top-level": ("evil.so", "a file at the top level"),
    }
    for label, (name, what) in unsafe.items():
        c.add(
            f"name-{label}", "unsafe name", rewrite(c.source, c.out / "tmp.pt2", adding((name, b"\x7fELF"))), "archive.unsafe_entry", what
        )
    # zipfile cuts a name at NUL when writing, so write a placeholder and patch the bytes
    nul = rewrite(c.source, c.out / "tmp.pt2", adding((f"{root}/data/aotinductor/model/x.so#.txt", b"\x7fELF"))).read_bytes()
    c.add("name-nul-in-name", "unsafe name", nul.replace(b"x.so#.txt", b"x.so\x00.txt"), "archive.unsafe_entry", "a NUL byte in a name")
    c.add(
        "name-duplicate",
        "unsafe name",
        rewrite(c.source, c.out / "tmp.pt2", adding((so, b"\x7fELF evil twin"))),
        "archive.unsafe_entry",
        "the .so twice, the second one different",
    )
    with zipfile.ZipFile(c.out / "tmp.pt2", "w") as zf:
        for info, data in entries(c.source):
            zf.writestr(info, data)
        link = zipfile.ZipInfo(f"{root}/data/aotinductor/model/libevil.so")
        link.create_system, link.external_attr = 3, 0o120777 << 16
        zf.writestr(link, "/lib/x86_64-linux-gnu/libc.so.6")
    c.add("name-symlink", "unsafe name", c.out / "tmp.pt2", "archive.unsafe_entry", "a symlink entry pointing at a system library")
    blob = bytearray(c.data)
    info = next(i for i, _ in entries(c.source) if i.filename == so)
    for pos in _central_records(c.data):
        name_len = struct.unpack("<H", c.data[pos + 28 : pos + 30])[0]
        if c.data[pos + 46 : pos + 46 + name_len] == so.encode():
            blob[pos + 8] |= 1  # "encrypted" in the central directory...
    blob[info.header_offset + 6] |= 1  # ...and in the local header
    c.add("name-encrypted", "unsafe name", bytes(blob), "archive.unsafe_entry", "the .so flagged as encrypted")


def _signature(c: _Corpus) -> Path | None:
    if c.keys is None:
        return None
    from aoti_guard.pt2.signing import load_private_key, sign_package
    from runtime_probe.trust.ed25519 import L
    from runtime_probe.trust.signature import SignatureEntry, parse_signature

    pub = ("--public-key", str(c.keys.public))
    signed = c.out / "signed-good.pt2"
    shutil.copy(c.source, signed)
    sign_package(signed, load_private_key(c.keys.private))
    c.add("signature-missing", "signature", c.data, "archive.signature_missing", "an unsigned package, a key required", pub)
    c.add(
        "signature-other-key",
        "signature",
        signed.read_bytes(),
        "archive.signature_invalid",
        "signed by one key, checked with another",
        ("--public-key", str(c.keys.other_public)),
    )

    def on_sig(fn: Callable[[bytes], bytes]) -> Callable[[str, bytes], bytes]:
        return lambda name, data: fn(data) if name.endswith(layout.SIGNATURE) else data

    def on_manifest(fn: Callable[[bytes], bytes]) -> Callable[[str, bytes], bytes]:
        return lambda name, data: fn(data) if name.endswith(layout.MANIFEST) else data

    def sig_field(**changes: Any) -> Callable[[bytes], bytes]:
        def edit(data: bytes) -> bytes:
            doc = json.loads(data)
            doc.update(changes)
            return json.dumps(doc).encode()

        return edit

    def non_canonical_s(data: bytes) -> bytes:
        e = parse_signature(data)
        s = int.from_bytes(e.signature[32:], "little") + L
        return SignatureEntry(e.algorithm, e.key_id, e.manifest_sha256, e.signature[:32] + s.to_bytes(32, "little")).to_bytes()

    variants: dict[str, tuple[Callable[[str, bytes], bytes], str, str]] = {
        "manifest-changed": (
            on_manifest(lambda d: d.replace(b'"model_name": "model"', b'"model_name":  "model"')),
            "archive.signature_invalid",
            "one space added to the signed manifest",
        ),
        "not-json": (on_sig(lambda d: b"\x00garbage"), "archive.signature_invalid", "a signature entry that is not JSON"),
        "algorithm-none": (on_sig(sig_field(algorithm="none")), "archive.signature_invalid", "algorithm 'none'"),
        "zero-signature": (on_sig(sig_field(signature="A" * 86 + "==")), "archive.signature_invalid", "64 zero bytes as the signature"),
        "short-signature": (on_sig(sig_field(signature="AAAA")), "archive.signature_invalid", "a 3-byte signature"),
        "bad-base64": (on_sig(sig_field(signature="!!not base64!!")), "archive.signature_invalid", "a signature that is not base64"),
        "schema-99": (on_sig(sig_field(schema_version="99.0")), "archive.signature_invalid", "signature schema 99"),
        "non-canonical-s": (on_sig(non_canonical_s), "archive.signature_invalid", "S + L (malleated signature)"),
        "entry-changed": (
            lambda n, d: d[:-1] + bytes([d[-1] ^ 1]) if n.endswith(".wrapper.so") else d,
            "archive.hash_mismatch",
            "the .so changed after signing",
        ),
        "entry-added": (
            lambda n, d: [(n, d), (n.rsplit("/", 1)[0] + "/extra.so", b"\x7fELF")] if n.endswith(".wrapper.so") else d,
            "archive.hash_mismatch",
            "an entry added after signing",
        ),
    }
    for label, (edit, code, what) in variants.items():
        c.add(f"signature-{label}", "signature", rewrite(signed, c.out / "tmp.pt2", edit), code, what, pub)
    plain = zipcraft.build([zipcraft.Raw(f"{c.root}/data/aotinductor/model/a.so", b"\x7fELF")])
    c.add("signature-plain-package", "signature", plain, "archive.signature_missing", "a package without a manifest, a key required", pub)
    return signed


def make_corpus(source: Path, out: Path, keys: Keys | None = None) -> list[Case]:
    """Write every case into ``out`` (created) and return them."""
    out.mkdir(parents=True, exist_ok=True)
    c = _Corpus(source, out, keys, source.read_bytes())
    with zipfile.ZipFile(source) as zf:
        c.root = zf.namelist()[0].split("/", 1)[0]
    _truncated(c)
    signed = _signature(c)
    _flipped(c, signed)
    _names(c)
    corpus_zip.add_cases(c, entries)
    corpus_manifest.add_cases(c, rewrite)
    corpus_manifest.add_weights_cases(c)
    corpus_cli.add_cases(c, rewrite)
    (out / "tmp.pt2").unlink(missing_ok=True)
    return c.cases


def make_keys(folder: Path) -> Keys:
    from aoti_guard.pt2.signing import generate_key

    folder.mkdir(parents=True, exist_ok=True)
    a = generate_key(folder / "release.key", force=True)
    b = generate_key(folder / "other.key", force=True)
    return Keys(Path(a.private), Path(a.public), Path(b.private), Path(b.public))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.hostile.make_corpus PKG OUT_DIR")
    target = Path(sys.argv[2])
    for case in make_corpus(Path(sys.argv[1]), target, make_keys(target / "keys")):
        print(f"{case.name:40} {','.join(sorted(case.expect)):50} {' '.join(case.args)}")
