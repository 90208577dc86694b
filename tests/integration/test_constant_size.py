"""The package's own size (issue 42, pytorch#186176): a parameter that uses only part of its
storage is serialised by AOTInductor with the whole storage, and the build names it (package
phase, ``build.constant_storage_oversized``) with its bytes, its storage's and the fix."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from .conftest import MODELS, Built, build_package

pytestmark = pytest.mark.integration


def _oversized(built: Built) -> list[dict[str, Any]]:
    assert built.report is not None, built.stdout[-2000:] + built.stderr[-2000:]
    return [f for p in built.report["phases"] for f in p["findings"] if f["code"] == "build.constant_storage_oversized"]


def _so_bytes(path: Path) -> int:
    with zipfile.ZipFile(path) as zf:
        return sum(i.file_size for i in zf.infolist() if i.filename.endswith(".so") and "/model/" in i.filename)


def test_a_parameter_sliced_from_a_larger_tensor_is_named_with_its_storage(tmp_path: Path) -> None:
    built = build_package(tmp_path, "view", f"{MODELS}:view_parameter", "--no-debug-twin")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [finding] = _oversized(built)
    assert finding["severity"] == "warning" and finding["phase"] == "package"
    storage = 20000 * 256 * 4
    assert finding["evidence"]["constants"] == [{"name": "w", "bytes": 10 * 256 * 4, "storage_bytes": storage}]
    assert finding["evidence"]["excess_bytes"] == storage - 10 * 256 * 4
    assert ".clone()" in finding["hint"]
    # what the finding says is what the package is: the 20 MB storage is in the .so, not the 10 KB
    assert _so_bytes(built.path) > storage


def test_an_rnn_after_flatten_parameters_carries_the_flat_buffer_once_per_parameter(tmp_path: Path) -> None:
    import torch

    built = build_package(tmp_path, "gru", f"{MODELS}:flat_gru", "--no-debug-twin")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [finding] = _oversized(built)
    gru = torch.nn.GRU(256, 512, batch_first=True)
    held = {f"rnn.{n}": p.numel() * 4 for n, p in gru.named_parameters()}
    flat = sum(held.values())
    named = {c["name"]: (c["bytes"], c["storage_bytes"]) for c in finding["evidence"]["constants"]}
    assert named == {name: (n, flat) for name, n in held.items()}
    assert finding["evidence"]["excess_bytes"] == (len(held) - 1) * flat
    assert _so_bytes(built.path) > len(held) * flat  # 4.7 MB of weights, the flat buffer once per parameter


def test_a_model_whose_constants_own_their_storage_has_no_finding(static_pkg: Built) -> None:
    assert _oversized(static_pkg) == []
