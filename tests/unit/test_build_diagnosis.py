"""The build reads its twin's NaN asserts as the probe does (issue 13 case 3), on output recorded
from the GPU machine (tests/unit/data/gpu: the sqrt->softmax model's twin)."""

from __future__ import annotations

from pathlib import Path

from aoti_guard.builder.validate.diagnose import twin_nonfinite

DATA = Path(__file__).parent / "data" / "gpu"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8", errors="replace")


def test_the_twins_nan_assert_is_an_error_naming_buffer_and_kernel() -> None:
    found = twin_nonfinite(read("nan_twin.stdout"), read("nan_twin.stderr"), "cuda", release_nonfinite=True)
    assert len(found) == 1
    f = found[0]
    assert f.code == "build.nonfinite" and f.severity.value == "error"
    assert f.evidence["buffer"] == "buf3"
    assert f.evidence["kernel"] == "triton_per_fused__softmax_exp_prepare_softmax_online_sqrt_sub_sum_0"
    assert "the first NaN appears in buf3" in f.message


def test_the_twins_assert_on_an_intermediate_warns_when_the_release_outputs_are_finite() -> None:
    """GPT-2 with a cache on CUDA (the zoo's GPU run): the efficient-attention kernel writes the
    -inf mask bias, the twin's asserts stop there, and the release model's outputs are right.
    That must not fail the build, and must still say which buffer and kernel the twin stops at."""
    found = twin_nonfinite(read("nan_twin.stdout"), read("nan_twin.stderr"), "cuda", release_nonfinite=False)
    assert [(f.code, f.severity.value) for f in found] == [("build.nonfinite", "warning")]
    f = found[0]
    assert "outputs are finite" in f.message and "buf3" in f.message
    assert f.evidence["kernel"] == "triton_per_fused__softmax_exp_prepare_softmax_online_sqrt_sub_sum_0"
    assert f.evidence["release_outputs_finite"] is True
    assert f.hint is not None and "attention mask" in f.hint


def test_a_cpu_twin_names_the_kernels_that_ran_but_no_buffer() -> None:
    stdout = "[ before_launch - cpp_fused_0 ]\n[ after_launch - cpp_fused_0 ]\n[ before_launch - cpp_fused__softmax_1 ]\n"
    found = twin_nonfinite(stdout, "", "cpu", release_nonfinite=True)
    assert [(f.code, f.severity.value) for f in found] == [("build.nonfinite", "info")]
    assert "cpp_fused__softmax_1" in found[0].message
    assert twin_nonfinite(stdout, "", "cpu", release_nonfinite=False) == []
