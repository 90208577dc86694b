"""Issue 13 case 4: the build records the valid values of each integer input that indexes a table,
for every indexing op the issue names (embedding, gather, index_select, advanced indexing), read
from the exported graph (aoti_guard/builder/export/value_ranges.py). Export only: no compile."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from aoti_guard.builder.export.value_ranges import index_value_ranges


def _ranges(module: torch.nn.Module, *args: Any) -> dict[str, tuple[int, int]]:
    return index_value_ranges(torch.export.export(module, args))


class Embed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.emb(ids)


class IndexSelect(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(5, 7))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.index_select(self.table, 1, idx)


class Gather(torch.nn.Module):
    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 0, idx)


class Advanced(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(6, 9))

    def forward(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        return self.table[rows].sum(0) + self.table[:, cols].sum(1).sum()


class TwoTables(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.big = torch.nn.Embedding(100, 4)
        self.small = torch.nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.big(ids) + self.small(ids) + x


def test_embedding_rows() -> None:
    assert _ranges(Embed(), torch.randint(0, 1000, (2, 3))) == {"ids": (0, 999)}


def test_index_select_takes_the_indexed_dim() -> None:
    assert _ranges(IndexSelect(), torch.tensor([0, 6, 2])) == {"idx": (0, 6)}


def test_gather_takes_the_indexed_dim_of_an_input_table() -> None:
    ranges = _ranges(Gather(), torch.randn(3, 4), torch.zeros(2, 4, dtype=torch.long))
    assert ranges == {"idx": (0, 2)}  # the float input x gets no range


def test_advanced_indexing_allows_negative_indices_per_dim() -> None:
    rows, cols = torch.tensor([0, 5, -6]), torch.tensor([8, -9, 1])
    assert _ranges(Advanced(), rows, cols) == {"rows": (-6, 5), "cols": (-9, 8)}


def test_an_id_that_indexes_two_tables_gets_the_narrower_range() -> None:
    assert _ranges(TwoTables(), torch.randint(0, 10, (3,)), torch.randn(3, 4)) == {"ids": (0, 9)}


def test_a_dynamic_table_has_no_fixed_range() -> None:
    x, idx = torch.randn(3, 4), torch.zeros(2, 4, dtype=torch.long)
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(Gather(), (x, idx), dynamic_shapes=({0: batch}, None))
    assert index_value_ranges(ep) == {}


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_dtypes(dtype: torch.dtype) -> None:
    assert _ranges(IndexSelect(), torch.tensor([1, 2], dtype=dtype)) == {"idx": (0, 6)}
