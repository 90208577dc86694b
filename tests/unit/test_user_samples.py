"""Golden samples of the user's own (build --samples, BuildSpec(samples=...)): checked against the
contract before anything compiles, one error per mistake (what failed, expected vs found, a hint)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from aoti_guard.builder.export.user_samples import check_sources, load_user_samples
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.outputs import build_paths
from aoti_guard.builder.pipeline import check_options
from runtime_probe.formats import safetensors as st
from runtime_probe.package.manifest import Dim, InputSpec, IOContract, OutputSpec, ParamSpec, ShapeGuard, Symbol, TensorSpec
from runtime_probe.reporting.errors import UsageError

BATCH = Dim("batch", 1, 8)
CONTRACT = IOContract(
    params=(ParamSpec("x", "positional_or_keyword", "positional"), ParamSpec("ids", "positional_or_keyword", "positional")),
    inputs=(
        InputSpec("x", "x", "tensor", 0, TensorSpec("float32", (BATCH, 4), ("4", 1), True, "cpu")),
        InputSpec("ids", "ids", "tensor", 1, TensorSpec("int64", (BATCH, 6), ("6", 1), True, "cpu", value_range=(0, 99))),
        InputSpec("scale", "scale", "constant", value=2),
    ),
    outputs=(OutputSpec("output", TensorSpec("float32", (BATCH, 4), ("4", 1), True, "cpu")),),
    symbols=(Symbol("batch", 1, 8, ("x.shape[0]",)),),
    guards=(ShapeGuard("L['x'].size()[0] <= 6", "batch <= 6", "batch must be at most 6", ("x",), ("x.shape[0]",)),),
)
EXAMPLE = [torch.zeros(2, 4), torch.zeros(2, 6, dtype=torch.int64), 2]


def good(batch: int = 3) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(batch, 4), "ids": torch.randint(0, 100, (batch, 6))}


def write(path: Path, tensors: dict[str, Any]) -> str:
    st.dump(tensors, str(path))
    return str(path)


def load(sources: list[Any], *, guards: bool = False) -> Any:
    return load_user_samples(sources, CONTRACT, EXAMPLE, guards_accepted=guards)


def refused(sources: list[Any], *, guards: bool = False) -> UsageError:
    with pytest.raises(UsageError) as info:
        load(sources, guards=guards)
    return info.value


def test_a_good_file_becomes_a_user_sample_named_after_its_stem(tmp_path: Path) -> None:
    tensors = good(3)
    path = write(tmp_path / "req 1.safetensors", tensors)
    (sample,), rows = load([path])
    assert (sample.id, sample.origin, sample.symbols) == ("req_1", "user", {"batch": 3})
    assert torch.equal(sample.leaves[0], tensors["x"]) and torch.equal(sample.leaves[1], tensors["ids"])
    assert sample.leaves[2] == 2  # the constant the model was specialized on: the example's
    assert rows == [{"id": "req_1", "source": path, "symbols": {"batch": 3}}]


def test_mappings_and_files_get_unique_ids_never_the_builds_own(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    paths = [write(tmp_path / d / "req.safetensors", good()) for d in ("a", "b")] + [write(tmp_path / "max.safetensors", good())]
    paths.append(write(tmp_path / "edge-overflow.safetensors", good()))  # a half-precision edge sample's id
    samples, _ = load([good(), *paths])
    assert [s.id for s in samples] == ["user1", "req", "req-2", "user-max", "user-edge-overflow"]


def test_an_unknown_name_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "a.safetensors", {**good(), "y": torch.zeros(1)})
    err = refused([path])
    assert "has tensors the model does not take: y" in err.message and "expected x, ids" in err.message
    assert err.hint is not None and "inspect" in err.hint


def test_a_missing_input_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "a.safetensors", {"x": torch.zeros(3, 4)})
    err = refused([path])
    assert f"sample file {path} lacks ids" in err.message and "found x" in err.message


def test_a_wrong_dtype_is_refused_with_the_conversion(tmp_path: Path) -> None:
    path = write(tmp_path / "a.safetensors", {**good(), "x": torch.zeros(3, 4, dtype=torch.float64)})
    err = refused([path])
    assert "x: dtype is float64, expected float32" in err.message and "expected float32; found float64" in err.message
    assert err.hint == "convert with x.to(torch.float32)"


def test_a_wrong_rank_is_refused(tmp_path: Path) -> None:
    err = refused([write(tmp_path / "a.safetensors", {**good(), "x": torch.zeros(3, 4, 1)})])
    assert "x: has 3 dimension(s), expected 2" in err.message and "found [3, 4, 1]" in err.message


def test_a_size_outside_the_dynamic_range_is_refused(tmp_path: Path) -> None:
    err = refused([write(tmp_path / "a.safetensors", good(9))])
    assert "dim 0 is 9" in err.message and "8" in err.message


def test_inputs_that_disagree_on_a_symbol_are_refused(tmp_path: Path) -> None:
    err = refused([write(tmp_path / "a.safetensors", {"x": torch.zeros(3, 4), "ids": torch.zeros(4, 6, dtype=torch.int64)})])
    assert "ids" in err.message and "batch" in err.message


def test_an_id_outside_its_table_is_refused(tmp_path: Path) -> None:
    err = refused([write(tmp_path / "a.safetensors", {**good(), "ids": torch.full((3, 6), 100)})])
    assert "ids holds 100" in err.message and "the table has 100 rows" in err.message


def test_an_accepted_export_guard_is_enforced_and_an_unaccepted_one_is_not(tmp_path: Path) -> None:
    path = write(tmp_path / "a.safetensors", good(7))
    err = refused([path], guards=True)
    assert "batch must be at most 6" in err.message
    (sample,), _ = load([path])  # the build fails on the unaccepted guard itself (build.export_specialized)
    assert sample.symbols == {"batch": 7}


def test_a_file_that_is_not_safetensors_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    path.write_bytes(b"not a safetensors file")
    err = refused([str(path)])
    assert "cannot be read" in err.message and err.hint is not None and "save_file" in err.hint
    with pytest.raises(UsageError, match="cannot be read"):
        check_sources([str(path)], "--samples")  # before any slow work too


def test_a_path_that_does_not_exist_is_refused_before_any_slow_work(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.safetensors")
    with pytest.raises(UsageError, match="no such file") as info:
        check_options(BuildOptions(output=str(tmp_path / "m.pt2"), samples=(missing,)))
    assert info.value.exit_code == 2 and missing in info.value.message
    with pytest.raises(UsageError, match="is a folder"):
        check_sources([str(tmp_path)], "--samples")


def test_a_mapping_value_that_is_not_a_tensor_and_a_bare_source_are_refused(tmp_path: Path) -> None:
    err = refused([{"x": [[1.0] * 4], "ids": torch.zeros(1, 6, dtype=torch.int64)}])
    assert "BuildSpec.samples[0]: x is a list" in err.message
    with pytest.raises(UsageError, match="not a list of samples"):
        check_sources(str(tmp_path / "a.safetensors"), "BuildSpec.samples")
    with pytest.raises(UsageError, match=r"BuildSpec.samples\[0\] is a int"):
        check_sources([3], "BuildSpec.samples")


def test_a_mapping_on_another_device_or_layout_is_taken_as_a_cpu_copy() -> None:
    tensors = good(2)
    (sample,), _ = load([{"x": tensors["x"].t().contiguous().t(), "ids": tensors["ids"]}])
    assert sample.leaves[0].is_contiguous() and torch.equal(sample.leaves[0], tensors["x"])


def test_the_build_never_writes_over_a_samples_file(tmp_path: Path) -> None:
    path = str(tmp_path / "a.safetensors")
    problems = build_paths(None, {"output": str(tmp_path / "m.pt2"), "samples": (path,), "json": path}).problems()
    assert any("the --samples file" in p[1] for p in problems)
