"""The manifest reader: strict types, version refusal, no exception but ManifestError."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime_probe.package.manifest import Dim, ManifestError, dump_manifest, parse_manifest


def minimal() -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "tool": {"name": "aoti-guard", "version": "0.1.0"},
        "created": "2026-11-22T00:00:00+00:00",
        "root": "model",
        "model_name": "model",
        "io": {
            "params": [{"name": "x", "kind": "positional_or_keyword", "passed": "positional"}],
            "inputs": [
                {
                    "name": "x",
                    "param": "x",
                    "kind": "tensor",
                    "index": 0,
                    "tensor": {
                        "dtype": "float32",
                        "shape": [{"expr": "batch", "min": 1, "max": 64}, 16],
                        "stride": [16, 1],
                        "contiguous": True,
                        "device": "cpu",
                    },
                }
            ],
            "outputs": [{"name": "output", "tensor": None}],
            "symbols": [{"name": "batch", "min": 1, "max": 64, "sources": ["x.shape[0]"]}],
        },
        "target": {"device_type": "cpu", "platform": "linux", "machine": "x86_64"},
        "toolchain": {"torch": "2.13.0", "python": "3.11.7"},
        "constants": [],
        "hashes": {"data/aotinductor/model/a.so": "00"},
        "golden": {
            "entry": "g",
            "samples": [],
            "tolerances": [{"output": "output", "atol": 1e-5, "rtol": 1e-6}],
            "nbytes": 0,
            "cap_bytes": 1,
        },
    }


def test_round_trip() -> None:
    m = parse_manifest(json.dumps(minimal()).encode())
    assert m.io.inputs[0].tensor is not None
    assert m.io.inputs[0].tensor.shape == (Dim("batch", 1, 64), 16)
    assert parse_manifest(dump_manifest(m)) == m


def test_unknown_fields_are_ignored_for_minor_upgrades() -> None:
    data = minimal()
    data["schema_version"] = "1.7"
    data["future_field"] = {"x": 1}
    assert parse_manifest(json.dumps(data).encode()).schema_version == "1.7"


@pytest.mark.parametrize("version", ["99.0", 99, "2.0"])
def test_newer_major_is_refused(version: Any) -> None:
    data = minimal()
    data["schema_version"] = version
    with pytest.raises(ManifestError) as info:
        parse_manifest(json.dumps(data).encode())
    assert info.value.code == "manifest.unsupported_version"


def _mutate(path: list[Any], value: Any) -> bytes:
    data = minimal()
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b"\xff\xfe", "not valid JSON"),
        (_mutate(["io", "inputs", 0, "tensor", "dtype"], 5), "io.inputs[0].tensor.dtype"),
        (_mutate(["io", "inputs", 0, "index"], True), "io.inputs[0].index"),
        (_mutate(["io", "symbols", 0, "max"], "64"), "io.symbols[0].max"),
        (_mutate(["hashes"], ["a"]), "hashes"),
        (_mutate(["toolchain"], None), "toolchain"),
        (_mutate(["schema_version"], None), "schema_version"),
        (json.dumps(minimal()).replace("1e-05", "NaN").encode(), "NaN"),
        (b'{"schema_version": "1.0", "tool": ' + b"[" * 100000 + b"]" * 100000 + b"}", "JSON"),
        (b'{"schema_version": "1.0", "root": "' + b"a" * (65 * 1024 * 1024) + b'"}', "limit"),
    ],
)
def test_invalid_manifests(raw: bytes, where: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(raw)
    assert info.value.code == "manifest.invalid"
    assert where in str(info.value)


def test_nan_tolerance_is_invalid() -> None:
    data = minimal()
    text = json.dumps(data).replace('"atol": 1e-05', '"atol": Infinity')
    with pytest.raises(ManifestError):
        parse_manifest(text.encode())
