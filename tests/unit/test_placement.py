"""Where each input lives (runtime_probe/package/placement.py), one rule for every reader: the
build's references, the child's placement of a sample, and the manifest that records it per leaf.
A CUDA model's CPU ids (docs/gpu-validation.md Run 28) are played here by a "meta" package with a
CPU leaf: the placement compares device strings only."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
import torch

from aoti_guard.builder.validate.references import call_with_leaves
from runtime_probe.child import ops
from runtime_probe.package.manifest import dump_manifest, parse_manifest
from runtime_probe.package.manifest_rules import _io_problems
from runtime_probe.package.placement import input_record, leaf_device

from .test_manifest import minimal


@pytest.mark.parametrize(
    ("leaf", "package", "placed"),
    [
        ("cuda", "cuda:1", "cuda:1"),  # on the model: its index too
        ("cpu", "cuda:1", "cpu"),  # a CUDA model's CPU ids stay on the CPU
        ("cpu", "cpu", "cpu"),
        ("cuda", "cuda", "cuda"),
    ],
)
def test_a_leaf_lives_on_the_package_device_or_its_own(leaf: str, package: str, placed: str) -> None:
    assert leaf_device(leaf, package) == placed


def _mixed(model: str = "cuda") -> dict[str, Any]:
    raw = minimal()
    x = raw["io"]["inputs"][0]
    ids = copy.deepcopy(x)
    ids.update(name="ids", param="ids", index=1)
    ids["tensor"].update(dtype="int64", shape=[4], stride=[1], device="cpu", value_range=[0, 9])
    x["tensor"]["device"] = model
    raw["io"]["params"].append({"name": "ids", "kind": "positional_or_keyword", "passed": "positional"})
    raw["io"]["inputs"].append(ids)
    raw["target"]["device_type"] = "cuda"
    return raw


def test_a_manifest_records_each_leafs_device_and_round_trips() -> None:
    m = parse_manifest(json.dumps(_mixed()).encode())
    assert [i.tensor.device for i in m.io.inputs if i.tensor is not None] == ["cuda", "cpu"]
    assert parse_manifest(dump_manifest(m)) == m
    assert list(_io_problems(m)) == []  # a CPU leaf in a CUDA package is a valid record
    assert [input_record(i)["device"] for i in m.io.inputs] == ["cuda", "cpu"]


def test_the_child_places_each_input_where_the_package_takes_it() -> None:
    m = parse_manifest(json.dumps(_mixed("meta")).encode())
    req = ops.RunRequest("g", {"symbols": {"batch": 2}}, [input_record(i) for i in m.io.inputs], m.io.in_spec, [], "meta")
    leaves = ops._leaves(req, {"x": torch.randn(2, 16), "ids": torch.zeros(4, dtype=torch.int64)})
    assert [str(t.device) for t in leaves] == ["meta", "cpu"]
    # --inputs-device replays a caller that put everything on one device: every leaf goes there
    values = {"x": torch.randn(2, 16), "ids": torch.zeros(4, dtype=torch.int64)}
    replay = ops._leaves(dataclasses.replace(req, input_device="meta"), values)
    assert [str(t.device) for t in replay] == ["meta", "meta"]


def test_the_references_run_each_input_where_the_package_takes_it() -> None:
    m = parse_manifest(json.dumps(_mixed("meta")).encode())
    seen: list[str] = []

    def model(x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        seen.extend(str(t.device) for t in (x, ids))
        return torch.zeros(1)

    io = dataclasses.replace(m.io, in_spec=_in_spec(2))
    call_with_leaves(model, io, [torch.randn(2, 16), torch.zeros(4, dtype=torch.int64)], "meta")
    assert seen == ["meta", "cpu"]


def _in_spec(n: int) -> str:
    from torch.utils import _pytree as pytree

    return pytree.treespec_dumps(pytree.tree_flatten((tuple(range(n)), {}))[1])
