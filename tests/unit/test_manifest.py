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


@pytest.mark.parametrize("version", ["99.0", "2.0"])
def test_newer_major_is_refused(version: Any) -> None:
    data = minimal()
    data["schema_version"] = version
    with pytest.raises(ManifestError) as info:
        parse_manifest(json.dumps(data).encode())
    assert info.value.code == "manifest.unsupported_version"


@pytest.mark.parametrize(
    ("version", "said"),
    [
        (1.6, 'the JSON number 1.6: it must be a string like "1.8"'),
        (99, 'the JSON number 99: it must be a string like "1.8"'),
        (True, "a boolean"),
        ("\u00b9.6", "not MAJOR.MINOR in ASCII digits"),  # superscript one: isdigit() says yes, int() no
        ("\u0661.6", "not MAJOR.MINOR in ASCII digits"),  # Arabic-Indic one: int() reads it, we do not
        ("1", "not MAJOR.MINOR"),
        ("1.6.0", "not MAJOR.MINOR"),
        ("1.6\n", "not MAJOR.MINOR"),
    ],
)
def test_a_schema_version_is_a_string_of_two_ascii_numbers(version: Any, said: str) -> None:
    data = minimal()
    data["schema_version"] = version
    with pytest.raises(ManifestError) as info:
        parse_manifest(json.dumps(data).encode())
    assert info.value.code == "manifest.invalid" and said in str(info.value)


@pytest.mark.parametrize(
    ("path", "raw", "where", "said"),
    [
        (["golden", "tolerances", 0, "atol"], "1" + "0" * 400, "golden.tolerances[0].atol", "beyond float64"),
        (["golden", "tolerances", 0, "measured_abs"], "-1" + "0" * 400, "golden.tolerances[0].measured_abs", "beyond float64"),
        (["io", "symbols", 0, "max"], "1" + "0" * 400, "io.symbols[0].max", "from -2**63 to 2**64-1"),
        (["io", "inputs", 0, "tensor", "shape", 1], "1" + "0" * 30, "io.inputs[0].tensor.shape[1]", "from -2**63 to 2**64-1"),
        (["validation", "seconds"], "1" + "0" * 400, "validation.seconds", "from -2**63 to 2**64-1"),
        (["validation", "scale"], "1e999", "validation.scale", "finite"),
        (["golden", "tolerances", 0, "rtol"], "true", "golden.tolerances[0].rtol", "found a boolean"),
    ],
)
def test_a_number_out_of_range_is_a_finding_not_a_crash(path: list[Any], raw: str, where: str, said: str) -> None:
    # json reads such ints exactly; float() then refused them with OverflowError (issue 40, finding 7)
    data = {**minimal(), "validation": {}}
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "@@NUMBER@@"
    with pytest.raises(ManifestError) as info:
        parse_manifest(json.dumps(data).replace('"@@NUMBER@@"', raw).encode())
    assert info.value.code == "manifest.invalid" and f"manifest.{where}: " in str(info.value) and said in str(info.value), str(info.value)


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


def _twin(weights: str) -> dict[str, Any]:
    return {
        "model_name": "debug_twin",
        "entry_prefix": "aoti_guard/twin/",
        "nan_asserts": True,
        "intermediate_value_printer": "3",
        "weights": weights,
    }


def test_the_twin_is_read_from_either_key_and_a_1_2_manifest_has_its_own_weights() -> None:
    old = {**minimal(), "schema_version": "1.2", "debug_twin": {k: v for k, v in _twin("own").items() if k != "weights"}}
    m = parse_manifest(json.dumps(old).encode())
    assert m.twin is not None and m.twin.weights == "own" and m.debug_twin_without_weights is None
    new = {**minimal(), "schema_version": "1.3", "debug_twin_without_weights": _twin("release")}
    m = parse_manifest(json.dumps(new).encode())
    assert m.debug_twin is None and m.twin is not None and m.twin.weights == "release"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"debug_twin": _twin("own"), "debug_twin_without_weights": _twin("release")}, "records two debug twins"),
        ({"debug_twin": _twin("release")}, "under debug_twin a twin whose weights are 'release'"),
        ({"debug_twin_without_weights": _twin("own")}, "under debug_twin_without_weights a twin whose weights are 'own'"),
    ],
)
def test_the_rules_refuse_a_twin_recorded_where_an_older_reader_would_crash_on_it(
    fields: dict[str, Any], problem: str, tmp_path: Any
) -> None:
    import zipfile

    from runtime_probe.package.archive import open_archive
    from runtime_probe.package.manifest_rules import check_manifest

    m = parse_manifest(json.dumps({**minimal(), **fields}).encode())
    path = tmp_path / "p.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("model/data/aotinductor/model/a.so", b"x")
    archive, _ = open_archive(path)
    assert archive is not None
    with archive:
        messages = [f.message for f in check_manifest(m, archive)]
    assert any(problem in msg for msg in messages), messages


@pytest.mark.parametrize(
    ("weights", "included", "refused"), [("own", "false", True), ("release", "true", True), ("release", "false", False)]
)
def test_the_twins_weights_must_be_what_its_wrapper_cpp_says(weights: str, included: str, refused: bool, tmp_path: Any) -> None:
    """A twin without weights recorded as having its own would be loaded without them and crash:
    its generated code (``AOTInductorModelBase(..., include_weights)``) decides, not the manifest."""
    import zipfile

    from runtime_probe.package.archive import open_archive
    from runtime_probe.package.manifest_rules import check_manifest

    key = "debug_twin" if weights == "own" else "debug_twin_without_weights"
    m = parse_manifest(json.dumps({**minimal(), key: _twin(weights)}).encode())
    wrapper = f"Model::Model() : AOTInductorModelBase(1,\n 1,\n 2,\n device_str,\n std::move(cubin_dir),\n {included}) {{}}"
    path = tmp_path / "p.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("model/data/aotinductor/model/a.so", b"x")
        zf.writestr("model/aoti_guard/twin/t.wrapper.cpp", wrapper)
    archive, _ = open_archive(path)
    assert archive is not None
    with archive:
        messages = [f.message for f in check_manifest(m, archive)]
    assert any(f"builds it with include_weights={included}" in msg for msg in messages) == refused, messages
