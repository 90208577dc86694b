"""Issue 42, data-dependent checks without a compile: the build reads the model's checks on an
input's value off the exported program (aoti_guard/builder/export/data_checks.py), in argument names;
the golden samples satisfy them (validate/golden.py); the manifest rules refuse one the loader
could not evaluate."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import torch
from torch.export import Dim

from aoti_guard.builder.export.contract import extract_contract
from aoti_guard.builder.golden import make_samples
from aoti_guard.builder.resolve.binding import bind
from runtime_probe.package.manifest import DataCheck, IOContract, parse_manifest
from runtime_probe.package.manifest_rules import _io_problems

from .test_manifest import minimal


class _Take(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        b = x.item()
        torch._check(b >= 0)
        torch._check(b < y.shape[0])
        return y[:b] * 2


@pytest.fixture(scope="module")
def exported() -> tuple[Any, IOContract, tuple[Any, ...]]:
    args = (torch.tensor(2), torch.randn(5, 3))
    dynamic = {"x": None, "y": {0: Dim("n", min=2, max=64)}}
    ep = torch.export.export(_Take(), args, dynamic_shapes=dynamic)
    return ep, extract_contract(ep, args, {}, bind(_Take(), args, {}), dynamic_shapes=dynamic), args


def test_the_check_is_recorded_in_argument_names(exported: tuple[Any, IOContract, tuple[Any, ...]]) -> None:
    _, contract, _ = exported
    values = {s.name: s.value_of for s in contract.symbols}
    assert values["u0"] == "x" and values["n"] is None
    checks = {c.expr: c for c in contract.data_checks or ()}
    assert checks["u0 < n"].words == "x's value must be < y.shape[0]"
    assert checks["u0 < n"].arguments == ("x", "y")
    assert checks["u0 < n"].text.startswith("u0 < s")  # torch's own, for the record


def test_every_generated_sample_satisfies_the_models_check(exported: tuple[Any, IOContract, tuple[Any, ...]]) -> None:
    """On main the min sample (n=2) kept the example's x=2 and broke ``b < y.shape[0]``."""
    ep, contract, args = exported
    samples, notes = make_samples(contract, list(args))
    assert {s.id for s in samples} >= {"example", "min", "max"}, notes
    for s in samples:
        x, y = s.leaves
        assert 0 <= int(x.item()) < y.shape[0], (s.id, s.symbols)
        assert int(x.item()) == s.symbols["u0"]
        ep.module()(x, y)  # the model's own checks hold


def _manifest(check: DataCheck, value_of: str = "k") -> Any:
    m = minimal()
    k = {"dtype": "int64", "shape": [], "stride": [], "contiguous": True, "device": "cpu"}
    m["io"]["params"].append({"name": "k", "kind": "positional_or_keyword", "passed": "positional"})
    m["io"]["inputs"].append({"name": "k", "param": "k", "kind": "tensor", "index": 1, "tensor": k})
    m["io"]["symbols"].append({"name": "u0", "min": -5, "max": 9, "value_of": value_of})
    m["io"]["data_checks"] = [dataclasses.asdict(check)]
    return parse_manifest(json.dumps(m).encode())


def test_the_manifest_rules_refuse_a_check_the_loader_cannot_evaluate() -> None:
    ok = _manifest(DataCheck("u0 < s0", "u0 < batch", "k's value must be < x.shape[0]", ("k", "x")))
    assert list(_io_problems(ok)) == []  # a value may be negative, unlike a size
    bad = _manifest(DataCheck("u0 < s9", "u0 < nowhere", "k's value must be < nowhere", ("k",)))
    assert any("data check 'u0 < nowhere'" in p for p in _io_problems(bad))
    not_one = _manifest(DataCheck("u0 < s0", "u0 < batch", "x's value must be < x.shape[0]", ("x",)), value_of="x")
    assert any("not a one-element tensor input" in p for p in _io_problems(not_one))
