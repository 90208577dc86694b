"""probe --shapes: the flag's grammar, and every input's sizes from the ones given (no torch)."""

from __future__ import annotations

import json

import pytest

from runtime_probe.errors import UsageError
from runtime_probe.package.manifest import parse_manifest
from runtime_probe.probe.shapes import parse_shapes, resolve_shapes

from .test_manifest import minimal


def _inputs() -> list:  # type: ignore[type-arg]
    m = minimal()
    mask = json.loads(json.dumps(m["io"]["inputs"][0]))
    mask.update(name="mask", param="mask", index=1)
    mask["tensor"].update(dtype="bool", shape=[{"expr": "batch", "min": 1, "max": 64}, 32], stride=[32, 1])
    m["io"]["inputs"].append(mask)
    return list(parse_manifest(json.dumps(m).encode()).io.inputs)


def test_grammar() -> None:
    assert parse_shapes("x:4x16,mask:4x32") == {"x": (4, 16), "mask": (4, 32)}
    assert parse_shapes("x['a']:2X3, t:scalar") == {"x['a']": (2, 3), "t": ()}
    for bad, words in (("x", "is not NAME:SHAPE"), ("x:4xa", "whole numbers"), ("x:4,x:5", "given twice"), ("x:-1x2", "negative")):
        with pytest.raises(UsageError, match=words):
            parse_shapes(bad)


def test_an_input_left_out_takes_the_sizes_the_others_set() -> None:
    sizes, symbols = resolve_shapes({"x": (8, 16)}, _inputs())
    assert sizes == {"x": [8, 16], "mask": [8, 32]} and symbols == {"batch": 8}
    with pytest.raises(UsageError, match="no tensor input y") as info:
        resolve_shapes({"y": (1,)}, _inputs())
    assert info.value.hint == "its tensor inputs: x, mask"
    with pytest.raises(UsageError, match="x has 2 dims in the contract, 1 given"):
        resolve_shapes({"x": (8,)}, _inputs())
    with pytest.raises(UsageError, match="give x's sizes too"):
        resolve_shapes({}, _inputs())
