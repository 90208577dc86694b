"""Issue 12: library pytree outputs (a ModelOutput-style dataclass) and derived dynamic sizes.

The output type is registered under a module name no child process can import, as a Hugging Face
``ModelOutput`` is for a process that never imported transformers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import MODELS, Built, build_package, run_probe

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def encoder_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "encoder", f"{MODELS}:encoder_output")  # the twin too: its child cannot import the output type
    assert built.returncode == 0, built.stdout + built.stderr
    return built


def _validate(report: dict) -> dict:  # type: ignore[type-arg]
    return next(p for p in report["phases"] if p["name"] == "validate")


def test_dataclass_output_builds_with_named_leaves(encoder_pkg: Built) -> None:
    assert encoder_pkg.report is not None
    export = next(p for p in encoder_pkg.report["phases"] if p["name"] == "export")
    assert export["detail"]["outputs"] == ["last_hidden_state", "pooled"]
    table = _validate(encoder_pkg.report)["detail"]["table"]
    assert {row["output"] for row in table} == {"last_hidden_state", "pooled"}


def test_derived_sequence_dimension_is_sampled_at_its_bounds(encoder_pkg: Built) -> None:
    assert encoder_pkg.report is not None
    validate = _validate(encoder_pkg.report)
    coverage = validate["detail"]["coverage"]
    # seq = 8 * seq8: the free symbol is named after the user's root Dim and taken to its min and max
    assert set(coverage) == {"batch", "seq8"}
    for sym in coverage.values():
        assert sym["min"] in sym["tested"] and sym["max"] in sym["tested"]
    assert {"min", "max"} <= set(validate["detail"]["samples"])
    assert not any(f["code"] == "build.sample_dropped" for f in validate["findings"])


def test_probe_runs_the_golden_samples_without_the_library(encoder_pkg: Built, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    proc = run_probe(str(encoder_pkg.path), "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    golden = next(p for p in json.loads(out.read_text())["phases"] if p["name"] == "golden")
    assert golden["status"] == "passed"


def test_the_twin_compiles_in_a_child_that_cannot_import_the_output_type(encoder_pkg: Built) -> None:
    """builder/twin/schedule.py: the child gets a flat program, so an output type only the factory registered
    (a ModelOutput, a DynamicCache) does not send the twin back to the build's own process."""
    assert encoder_pkg.report is not None
    twin = next(p for p in encoder_pkg.report["phases"] if p["name"] == "debug_twin")
    assert twin["status"] == "passed" and twin["findings"] == []
    assert twin["detail"]["where"] == "a child process, beside the release compile", twin["detail"]
    assert "not_in_child" not in twin["detail"]
    ran = twin["detail"]["check"]
    assert ran["kernels"] and ran["max_abs_vs_release"] == 0.0


_TWIN_WITHOUT_THE_LIBRARY = """
import sys, torch
import runtime_probe
rel = runtime_probe.load(sys.argv[1])
twin = runtime_probe.load(sys.argv[1], model="debug_twin")
ids = torch.randint(0, 50, (3, 24)); mask = torch.ones(3, 24, dtype=torch.int64)
a, b = rel(input_ids=ids, attention_mask=mask), twin(input_ids=ids, attention_mask=mask)
assert type(a).__name__ == type(b).__name__ == "NamedOutputs", (type(a), type(b))
assert list(a) == list(b) == ["last_hidden_state", "pooled"], (list(a), list(b))
assert all(torch.equal(a[k], b[k]) for k in a)
try:
    twin(input_ids=torch.randint(0, 50, (3, 40)), attention_mask=torch.ones(3, 40, dtype=torch.int64))
except runtime_probe.InputContractError as exc:
    print("refused:", exc.code, exc.argument)
print("OK")
"""


def test_the_twin_takes_the_models_call_structure_by_name(encoder_pkg: Built) -> None:
    """The twin's own call wrapper is flat; the guarded loader calls it like the release model, with
    the outputs named from the manifest, and checks its inputs the same way."""
    proc = subprocess.run(
        [sys.executable, "-c", _TWIN_WITHOUT_THE_LIBRARY, str(encoder_pkg.path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]
    assert "refused: input.range input_ids" in proc.stdout, proc.stdout  # seq 40 = 8 * 5, above seq8's maximum 4
    assert "before_launch" in proc.stdout  # it is the twin: its printer ran


def test_a_boundary_that_cannot_be_sampled_fails_the_build(pkg_dir: Path) -> None:
    from aoti_guard.builder.golden import coverage
    from runtime_probe.package.manifest import Dim, InputSpec, IOContract, Symbol, TensorSpec

    # n is an input's size (x: [n]): a symbol no input carries is an output's data-dependent size, never a gap
    x = InputSpec("x", "x", "tensor", 0, TensorSpec("float32", (Dim("n", 2, 12),), (1,), True, "cpu"))
    contract = IOContract(params=(), inputs=(x,), outputs=(), symbols=(Symbol("n", 2, 12, ()),), in_spec="", out_spec="")

    from aoti_guard.builder.golden import Sample

    table, gaps = coverage(contract, [Sample("example", {"n": 5}, [])])
    assert table["n"]["tested"] == [5]
    assert gaps == ["n: its minimum 2 was not tested", "n: its maximum 12 was not tested"]


def test_shifted_size_relation_is_sampled(pkg_dir: Path) -> None:
    built = build_package(pkg_dir, "shifted", f"{MODELS}:shifted", "--no-debug-twin")
    assert built.returncode == 0, built.stdout + built.stderr
    assert built.report is not None
    coverage = _validate(built.report)["detail"]["coverage"]
    assert coverage["n"]["min"] in coverage["n"]["tested"] and coverage["n"]["max"] in coverage["n"]["tested"]


def test_offline_download_in_a_factory_gets_a_hint() -> None:
    from aoti_guard.builder.resolve.target import factory_hint

    try:
        try:
            raise OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files.")
        except OSError as inner:
            raise RuntimeError("from_pretrained failed") from inner
    except RuntimeError as exc:
        assert "random weights" in factory_hint(exc, "default")
    assert factory_hint(ValueError("bad shape"), "default") == "default"
