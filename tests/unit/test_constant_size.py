"""The rule of builder/package/constant_size.py: a constant serialised with more bytes than it
holds (a parameter's whole storage, pytorch#186176; a buffer's stride-preserving clone) is named,
with its bytes, its storage's and the excess."""

from __future__ import annotations

from typing import Any

import pytest

from aoti_guard.builder.package.constant_size import (
    ConstantBytes,
    constant_bytes,
    oversized_constants,
    oversized_finding,
    serialised_nbytes,
)

torch = pytest.importorskip("torch")


class _Sliced(torch.nn.Module):
    """A parameter and a buffer, each a slice of a larger tensor (``own``: cloned first)."""

    def __init__(self, own: bool) -> None:
        super().__init__()
        big = torch.randn(100, 8)
        self.w = torch.nn.Parameter(big[:4].clone() if own else big[:4])
        self.register_buffer("b", big[4:8].clone() if own else big[4:8])  # a contiguous buffer slice: cloned by Inductor anyway

    def forward(self, x: Any) -> Any:
        return x @ self.w.T + x @ self.b.T


def _specs(ep: Any) -> Any:
    from aoti_guard.builder.export.contract import extract_constants

    return extract_constants(ep, {"w": "w", "b": "b"})


def test_a_parameter_view_is_serialised_with_its_whole_storage_and_a_buffer_with_its_span() -> None:
    big = torch.zeros(100, 8)
    assert serialised_nbytes(big[:4], "parameter") == 100 * 8 * 4
    assert serialised_nbytes(big[:4].clone(), "parameter") == 4 * 8 * 4
    assert serialised_nbytes(big[:4], "buffer") == 4 * 8 * 4  # compile_fx clones buffers, preserving strides
    assert serialised_nbytes(big[:, :2], "buffer") == (99 * 8 + 2) * 4  # a strided buffer keeps its gaps
    assert serialised_nbytes(big[:0], "parameter") == 0


def test_the_sliced_parameter_is_named_and_its_clone_is_not() -> None:
    sliced = torch.export.export(_Sliced(own=False), (torch.randn(2, 8),))
    finding = oversized_finding(constant_bytes(sliced, _specs(sliced)))
    assert finding is not None and finding.code == "build.constant_storage_oversized"
    assert finding.evidence["constants"] == [{"name": "w", "bytes": 128, "storage_bytes": 3200}]
    assert finding.evidence["excess_bytes"] == 3072 and "w holds 128 bytes" in finding.message
    owned = torch.export.export(_Sliced(own=True), (torch.randn(2, 8),))
    assert oversized_finding(constant_bytes(owned, _specs(owned))) is None


def test_the_excess_is_summed_and_the_largest_named_first() -> None:
    rows = [ConstantBytes("a", 10, 10), ConstantBytes("b", 10, 1000), ConstantBytes("c", 20, 100_000)]
    finding = oversized_finding(rows)
    assert finding is not None
    assert finding.evidence["excess_bytes"] == 990 + 99_980
    assert [c["name"] for c in finding.evidence["constants"]] == ["c", "b"]


def test_a_package_without_its_weights_writes_no_blob_and_has_no_finding() -> None:
    sliced = torch.export.export(_Sliced(own=False), (torch.randn(2, 8),))
    assert oversized_constants(sliced, _specs(sliced), {"aot_inductor.package_constants_in_so": False}) == []
    assert len(oversized_constants(sliced, _specs(sliced), {})) == 1
