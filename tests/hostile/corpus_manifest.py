"""Corpus cases for the manifest (every kind of broken or lying JSON) and for --weights files.

Manifests are rewritten with a consistent CRC, so only the reader can object; without a signature
nothing else stands between a forged manifest and the later phases, so each case must stop at the
archive phase. Weights cases pass the archive, host and load phases and must stop at constants,
before ``load_constants`` ever sees the file.
"""

from __future__ import annotations

import copy
import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime_probe.formats.safetensors import ITEMSIZE, TORCH_TO_DTYPE
from runtime_probe.runtime import layout

if TYPE_CHECKING:
    from .make_corpus import _Corpus

Rewrite = Callable[[Path, Path, Callable[[str, bytes], Any]], Path]


def _manifest(source: Path) -> dict[str, Any]:
    with zipfile.ZipFile(source) as zf:
        name = next(n for n in zf.namelist() if n.endswith(layout.MANIFEST))
        doc: dict[str, Any] = json.loads(zf.read(name))
        return doc


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def add_cases(c: _Corpus, rewrite: Rewrite) -> None:
    base = _manifest(c.source)
    tensor_input = next(i for i in base["io"]["inputs"] if i.get("tensor"))["name"]

    def edited(fn: Callable[[dict[str, Any]], Any]) -> bytes:
        m = copy.deepcopy(base)
        fn(m)
        return json.dumps(m, indent=1).encode()

    def text(fn: Callable[[str], str]) -> bytes:
        return fn(json.dumps(base, indent=1)).encode()

    def first_input(m: dict[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = next(i for i in m["io"]["inputs"] if i["name"] == tensor_input)["tensor"]
        return spec

    invalid = "manifest.invalid"

    def rename_param(new: str) -> Callable[[dict[str, Any]], None]:
        """Rename the first parameter everywhere it appears (params, its inputs' param and name)."""

        def edit(m: dict[str, Any]) -> None:
            old = m["io"]["params"][0]["name"]
            m["io"]["params"][0]["name"] = new
            for i in m["io"]["inputs"]:
                if i["param"] == old:
                    i["param"], i["name"] = new, new + i["name"][len(old) :]
            for sample in (m.get("golden") or {}).get("samples", []):  # or the golden rule would object first
                sample["inputs"] = {(new + k[len(old) :] if k.startswith(old) else k): v for k, v in sample["inputs"].items()}

        return edit

    cases: dict[str, tuple[bytes, str, str]] = {
        "not-json": (b"{this is not json", invalid, "not JSON"),
        "not-utf8": (b'{"schema_version": "1.0", "x": "\xff\xfe"}', invalid, "bytes that are not UTF-8"),
        "empty": (b"", invalid, "an empty manifest"),
        "utf8-bom": (b"\xef\xbb\xbf" + json.dumps(base).encode(), invalid, "a byte-order mark before the JSON"),
        "json-array": (b"[1, 2, 3]", invalid, "a JSON array"),
        "json-null": (b"null", invalid, "JSON null"),
        "schema-99": (edited(lambda m: m.update(schema_version="99.0")), "manifest.unsupported_version", "schema_version 99.0"),
        "schema-99-int": (edited(lambda m: m.update(schema_version=99)), invalid, "schema_version 99 as a number (must be a string)"),
        "schema-garbage": (edited(lambda m: m.update(schema_version=["1"])), invalid, "schema_version a list"),
        "no-schema": (edited(lambda m: m.pop("schema_version")), invalid, "no schema_version"),
        "missing-io": (edited(lambda m: m.pop("io")), invalid, "no io field"),
        "io-a-string": (edited(lambda m: m.update(io="x")), invalid, "io is a string"),
        "hashes-a-list": (edited(lambda m: m.update(hashes=[])), invalid, "hashes is a list"),
        "device-a-number": (edited(lambda m: m["target"].update(device_type=5)), invalid, "device_type is a number"),
        "shape-strings": (edited(lambda m: first_input(m).update(shape=["a", None])), invalid, "a shape of strings and null"),
        "bool-for-int": (edited(lambda m: m["golden"].update(nbytes=True)), invalid, "true where an integer belongs"),
        "nan-tolerance": (text(lambda t: t.replace('"atol": ', '"atol": NaN, "x": ', 1)), invalid, "atol: NaN"),
        "infinite-tolerance": (text(lambda t: t.replace('"atol": ', '"atol": 1e999, "x": ', 1)), invalid, "atol: 1e999 (infinity)"),
        "negative-tolerance": (edited(lambda m: m["golden"]["tolerances"][0].update(atol=-1.0)), invalid, "atol: -1"),
        "huge-integer": (
            text(lambda t: t.replace('"nbytes": ', '"nbytes": ' + "9" * 5000 + ', "y": ', 1)),
            invalid,
            "a 5000-digit integer",
        ),
        "over-size-cap": (edited(lambda m: m.update(created="x" * (17 << 20))), invalid, "a 17 MiB string (over the 16 MiB cap)"),
        "huge-model-name": (edited(lambda m: m.update(model_name="m" * 1_000_000)), invalid, "a 1 MB model name"),
        "huge-dtype": (edited(lambda m: first_input(m).update(dtype="float32" + "x" * 5_000_000)), invalid, "a 5 MB dtype string"),
        "deep-nesting-json": (text(lambda t: '{"deep": ' + _nested(200_000) + ", " + t.lstrip()[1:]), invalid, "lists nested 200,000 deep"),
        "deep-nesting-values": (
            edited(lambda m: m.update(validation={"a": json.loads(_nested(90))})),
            invalid,
            "lists nested 90 deep in a free-form field",
        ),
        "many-bad-hashes": (
            edited(lambda m: m["hashes"].update({f"../x{i}": "0" * 64 for i in range(100_000)})),
            invalid,
            "100,000 hashes for '..' names",
        ),
        "model-name-traversal": (edited(lambda m: m.update(model_name="../../../tmp/x")), invalid, "model_name '../../../tmp/x'"),
        "model-missing": (edited(lambda m: m.update(model_name="other")), invalid, "a model the archive does not hold"),
        "twin-in-aoti-dir": (
            edited(
                lambda m: m.update(
                    debug_twin={
                        "model_name": "t",
                        "entry_prefix": "data/aotinductor/model/",
                        "nan_asserts": True,
                        "intermediate_value_printer": "3",
                    }
                )
            ),
            invalid,
            "a debug twin folder inside torch's load path",
        ),
        "twin-traversal": (
            edited(
                lambda m: m.update(
                    debug_twin={"model_name": "../t", "entry_prefix": "../", "nan_asserts": True, "intermediate_value_printer": "3"}
                )
            ),
            invalid,
            "a debug twin named '../t' under '../'",
        ),
        "twin-without-weights-as-debug-twin": (
            edited(
                lambda m: m.update(
                    debug_twin={
                        "model_name": "debug_twin",
                        "entry_prefix": "aoti_guard/twin/",
                        "nan_asserts": True,
                        "intermediate_value_printer": "3",
                        "weights": "release",
                    }
                )
            ),
            invalid,
            "a twin without weights under debug_twin, where a 1.2 reader would run it without them",
        ),
        "golden-entry-missing": (
            edited(lambda m: m["golden"].update(entry="aoti_guard/missing.safetensors")),
            invalid,
            "golden samples in a missing entry",
        ),
        "golden-unknown-input": (
            edited(lambda m: m["golden"]["samples"][0]["inputs"].update(ghost="k")),
            invalid,
            "a golden sample for an input the contract lacks",
        ),
        "stride-code": (
            edited(lambda m: first_input(m).update(stride=["__import__('os').system('id')", 1], contiguous=False)),
            invalid,
            "Python code as a stride",
        ),
        "dtype-not-torch": (edited(lambda m: first_input(m).update(dtype="nn")), invalid, "dtype 'nn'"),
        "device-tpu": (edited(lambda m: m["target"].update(device_type="tpu")), invalid, "device_type 'tpu'"),
        "hash-not-hex": (
            edited(lambda m: m["hashes"].update({k: "z" * 64 for k in list(m["hashes"])[:1]})),
            invalid,
            "a hash that is not hex",
        ),
        "hash-for-missing-entry": (
            edited(lambda m: m["hashes"].update({"data/aotinductor/model/gone.so": "0" * 64})),
            "archive.hash_mismatch",
            "a hash for an entry that is not there",
        ),
        "param-name-space": (edited(rename_param("x y")), invalid, "a parameter named 'x y'"),
        "param-name-rlo": (edited(rename_param("x\u202eyx")), invalid, "a parameter name holding U+202E (right-to-left override)"),
        "param-name-newline": (edited(rename_param("x\nFAKE: PASSED")), invalid, "a parameter name holding a newline"),
        "param-name-ansi": (edited(rename_param("x\x1b[2J\x1b[32mok")), invalid, "a parameter name holding ANSI escapes"),
        "param-name-keyword": (edited(rename_param("lambda")), invalid, "a parameter named 'lambda' (a keyword)"),
        "value-range-float": (
            edited(lambda m: first_input(m).update(value_range=[0, 9])),
            invalid,
            "a value range on a float input",
        ),
        "hash-removed": (
            edited(lambda m: m["hashes"].pop(next(k for k in sorted(m["hashes"]) if k != layout.GOLDEN))),
            "archive.hash_mismatch",
            "an entry the manifest no longer lists",
        ),
    }
    for label, (raw, code, what) in cases.items():

        def edit(name: str, data: bytes, raw: bytes = raw) -> bytes:
            return raw if name.endswith(layout.MANIFEST) else data

        c.add(f"manifest-{label}", "manifest", rewrite(c.source, c.out / "tmp.pt2", edit), code, what)


def _weights_file(constants: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """(header JSON, data) of a valid safetensors file holding zeros for ``constants``."""
    header: dict[str, Any] = {}
    offset = 0
    for const in constants:
        code = TORCH_TO_DTYPE[const["dtype"]]
        size = ITEMSIZE[code]
        for d in const["shape"]:
            size *= d
        header[const["fqn"]] = {"dtype": code, "shape": const["shape"], "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return raw, bytes(offset)


def add_weights_cases(c: _Corpus) -> None:
    constants = [k for k in _manifest(c.source)["constants"] if k["storage"] == "package"]
    if not constants:
        return
    header, data = _weights_file(constants)
    good = struct.pack("<Q", len(header)) + header + data
    first = constants[0]["fqn"]
    lying_shape = json.loads(header)
    lying_shape[first]["shape"] = [100_000, 100_000]
    lying_offsets = json.loads(header)
    lying_offsets[first]["data_offsets"] = [0, 1 << 40]
    variants = {
        "truncated-data": (good[:-10], "the last 10 bytes cut"),
        "truncated-header": (good[: 8 + len(header) // 2], "cut inside its JSON header"),
        "empty": (b"", "an empty file"),
        "header-length-huge": (struct.pack("<Q", 2**63) + good[8:], "a header length of 2**63"),
        "header-length-lies": (struct.pack("<Q", len(header) + 64) + good[8:], "a header length 64 bytes too long"),
        "header-not-json": (struct.pack("<Q", 16) + b"\x00" * 16 + data, "a header of NUL bytes"),
        "shape-lies": (_with_header(lying_shape, data), "a shape of 10**10 elements over a few bytes"),
        "offsets-lie": (_with_header(lying_offsets, data), "data offsets 1 TiB long"),
    }
    for label, (content, what) in variants.items():
        path = c.out / f"weights-{label}.safetensors"
        path.write_bytes(content)
        c.add_existing(f"weights-{label}", "weights", c.source, "constants.unreadable", what, ("--weights", str(path)))


def _with_header(header: dict[str, Any], data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + data
