"""probe --shapes: the flag's grammar, and every input's sizes from the ones given (no torch)."""

from __future__ import annotations

import json

import pytest

from runtime_probe.package.manifest import parse_manifest
from runtime_probe.package.sample_ids import is_probe_run
from runtime_probe.probe.shapes import describe, parse_shapes, resolve_shapes, run_names, shape_sets
from runtime_probe.reporting.errors import UsageError

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


def test_one_input_twice_in_a_set_says_to_repeat_the_flag() -> None:
    with pytest.raises(UsageError) as caught:
        parse_shapes("x:4x16,x:8x16")
    assert "x is given twice in 'x:4x16,x:8x16'" in caught.value.message
    assert caught.value.hint is not None and "repeat the flag: --shapes x:... --shapes x:..." in caught.value.hint


def test_sets_their_run_names_and_labels() -> None:
    """The library's one string is one set (as before); a tuple is several, each run named and
    labelled with every input's sizes; a golden sample may not take one of those names."""
    assert shape_sets(None) == () and shape_sets("x:4x16") == ("x:4x16",) and shape_sets(["a:1", "a:2"]) == ("a:1", "a:2")
    assert run_names(1) == ["shapes"] and run_names(3) == ["shapes1", "shapes2", "shapes3"]
    assert describe({"x": [4, 16], "mask": [4, 32], "t": []}) == "x:4x16,mask:4x32,t:scalar"
    assert all(is_probe_run(n) for n in ("inputs", "shapes", "shapes1", "shapes12"))
    assert not any(is_probe_run(n) for n in ("shapesA", "shapes_1", "example", "shapes\u0661"))


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
