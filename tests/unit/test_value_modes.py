"""Issue 25, defect 2: which value check a guarded model runs (``check_values``), and the
device-side design ("device": clamped ids, NaN outputs for a bad call) on CPU tensors, without a
package: ``DeviceValues`` only calls torch ops, so its guarantee is checked here on every run."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import torch

from runtime_probe.guard.values import DEFAULT_MODE, DeviceValues, device_problem, resolve_mode
from runtime_probe.package.manifest import Manifest, parse_manifest
from runtime_probe.reporting.errors import InputContractError, UsageError

from .test_manifest import minimal


def _manifest(out_dtype: str = "float32", nested: bool = False) -> Manifest:
    """ids int64 [4, 6] indexing a 1000-row table; one output of ``out_dtype``."""
    m = copy.deepcopy(minimal())
    tensor: dict[str, Any] = {"dtype": "int64", "shape": [4, 6], "stride": [6, 1], "contiguous": True, "device": "cpu"}
    m["io"]["params"] = [{"name": "ids", "kind": "positional_or_keyword", "passed": "positional"}]
    name = "ids[0]" if nested else "ids"
    m["io"]["inputs"] = [{"name": name, "param": "ids", "kind": "tensor", "index": 0, "tensor": {**tensor, "value_range": [0, 999]}}]
    out = {"dtype": out_dtype, "shape": [4, 16], "stride": [16, 1], "contiguous": True, "device": "cpu"}
    m["io"]["outputs"] = [{"name": "output", "tensor": out}]
    return parse_manifest(json.dumps(m).encode())


def test_the_defaults_check_values_on_every_device() -> None:
    assert DEFAULT_MODE == {"cpu": "sync", "cuda": "sync"}
    assert resolve_mode(None, "cpu", _manifest()) == "sync"
    assert resolve_mode(None, "cuda", _manifest()) == "sync"
    assert (resolve_mode(True, "cuda", _manifest()), resolve_mode(False, "cpu", _manifest())) == ("sync", "off")
    assert resolve_mode("device", "cpu", _manifest()) == "device"


def test_device_falls_back_to_sync_where_it_cannot_keep_its_promise(monkeypatch: pytest.MonkeyPatch) -> None:
    """With "device" as a default (DEFAULT_MODE flipped, as the lead may from the GPU measurement):
    an int64 output cannot hold NaN, and a nested ids leaf is not clamped, so such a package reads
    the values; asking for "device" explicitly is refused with the reason."""
    monkeypatch.setitem(DEFAULT_MODE, "cuda", "device")
    assert resolve_mode(None, "cuda", _manifest()) == "device"
    ints, nested = _manifest("int64"), _manifest(nested=True)
    assert device_problem(ints) == "the output output is int64, which cannot be marked invalid (NaN)"
    assert device_problem(nested) == "the range-checked input ids[0] is nested in an argument"
    assert resolve_mode(None, "cuda", ints) == resolve_mode(None, "cuda", nested) == "sync"
    with pytest.raises(UsageError, match="int64, which cannot be marked invalid"):
        resolve_mode("device", "cuda", ints)
    with pytest.raises(UsageError, match="unknown check_values 'fast'"):
        resolve_mode("fast", "cpu", _manifest())


def test_device_values_clamp_the_ids_and_mark_a_bad_calls_outputs() -> None:
    table = torch.randn(1000, 16)
    dev = DeviceValues(_manifest(), torch)
    ids = torch.randint(0, 1000, (4, 6))
    (safe,), ok = dev.clamp([("ids", ids)])
    good = dev.poison([table[safe].sum(1), 3], ok)
    assert good[0].equal(table[ids].sum(1)) and good[1] == 3  # bit for bit, non-tensors untouched
    dev.raise_for_last_call()  # in range: nothing to raise

    bad = ids.clone()
    bad[1, 2], bad[3, 0] = 5000, -7
    (safe,), ok = dev.clamp([("ids", bad)])
    assert int(safe.min()) >= 0 and int(safe.max()) <= 999  # nothing the table does not have reaches the lookup
    out = dev.poison_tree({"sum": table[safe].sum(1), "rows": table[safe]}, ok)
    assert bool(out["sum"].isnan().all()) and bool(out["rows"].isnan().all())  # no plausible wrong row
    with pytest.raises(InputContractError) as info:
        dev.raise_for_last_call()
    assert (info.value.code, info.value.argument) == ("input.value_range", "ids")
    assert str(info.value).startswith("ids holds 5000 at [1, 2]; the table has 1000 rows")
    dev.raise_for_last_call()  # raised once: the next sync has nothing left to say
