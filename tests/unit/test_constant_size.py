"""The rule of builder/package/constant_size.py: a constant serialised with more bytes than it
holds (its whole storage, pytorch#186176) is named, with its bytes, its storage's and the excess."""

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
    def __init__(self, own: bool) -> None:
        super().__init__()
        big = torch.randn(100, 8)
        self.register_buffer("w", big[:4].clone() if own else big[:4])
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        return self.lin(x) @ self.w.T


def _specs(ep: Any) -> Any:
    from aoti_guard.builder.export.contract import extract_constants

    return extract_constants(ep, {"w": "w", "lin.weight": "lin_weight", "lin.bias": "lin_bias"})


def test_a_view_is_serialised_with_its_whole_storage() -> None:
    big = torch.zeros(100, 8)
    assert serialised_nbytes(big[:4]) == 100 * 8 * 4
    assert serialised_nbytes(big[:4].clone()) == 4 * 8 * 4
    assert serialised_nbytes(big[:0]) == 0


def test_the_sliced_buffer_is_named_and_its_clone_is_not() -> None:
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
