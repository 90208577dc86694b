"""The escalation's readers, on output recorded on the GPU machine (H100, torch 2.11.0+cu130,
2026-11-22; scripts/gpu/explore.sh, removed, last in commit 0cc60b5). Paths in the recordings are replaced by <placeholders>."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_probe.child.messages import cuda_error, input_check
from runtime_probe.ladder.readers import (
    classify_frames,
    first_sanitizer_error,
    kernel_trace,
    nan_buffer,
    parse_backtrace,
)

DATA = Path(__file__).parent / "data" / "gpu"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_load_crash_backtrace_is_a_cxx_runtime_mismatch() -> None:
    frames = parse_backtrace(read("cuda_gdb_load_crash.txt"))
    assert frames.signal == "SIGSEGV"
    assert frames.frames[0].startswith("std::codecvt<char16_t, char, __mbstate_t>::do_unshift")
    assert frames.libraries[0].endswith(".wrapper.so")
    assert any("parse_device_str" in f for f in frames.frames)
    cause, explanation, frame = classify_frames(frames)
    assert cause == "cxx_runtime" and "libstdc++" in explanation
    assert frame is not None and "codecvt" in frame


@pytest.mark.parametrize(
    ("frame", "cause"),
    [
        # synthetic frames (not recorded): one per rule, to pin each rule's pattern and its order
        ("cuModuleLoadData  [libcuda.so.1]", "kernel_image"),
        ("cuLibraryLoadData  [libcuda.so.1]", "kernel_image"),
        ("torch::aot_inductor::AOTInductorModelBase::update_constant_buffer  [model.wrapper.so]", "weights"),
        ("malloc_consolidate  [libc.so.6]", "allocator"),
        ("_int_free  [libc.so.6]", "allocator"),
        ("cpp_fused_add_0  [model.wrapper.so]", "kernel_launch"),
        ("main  [python3]", "unknown"),
    ],
)
def test_each_cause_rule(frame: str, cause: str) -> None:
    from runtime_probe.ladder.readers import Frames

    assert classify_frames(Frames(frames=("??  [libfoo.so]", frame)))[0] == cause


def test_innermost_matching_frame_decides() -> None:
    from runtime_probe.ladder.readers import Frames

    frames = Frames(frames=("_int_malloc  [libc.so.6]", "load_constants  [model.wrapper.so]"))
    assert classify_frames(frames)[0] == "allocator"


def test_twin_names_the_faulting_user_triton_kernel() -> None:
    trace = kernel_trace(read("gather_twin.stdout"))
    assert trace.unfinished == "_gather_kernel_0"
    code, line = cuda_error(read("gather_twin.stderr")) or ("", "")
    assert code == "run.illegal_memory_access" and "global/shared address space" in line


def test_release_abort_is_classified_as_illegal_memory_access() -> None:
    assert read("gather_release.rc").strip() == "-6"
    code, _ = cuda_error(read("gather_release.stderr")) or ("", "")
    assert code == "run.illegal_memory_access"


def test_twin_names_the_first_kernel_after_which_a_nan_appears() -> None:
    trace = kernel_trace(read("nan_twin.stdout"))
    assert trace.unfinished is None
    assert trace.last_finished == "triton_per_fused__softmax_exp_prepare_softmax_online_sqrt_sub_sum_0"
    assert trace.launched == ("aoti_torch_cuda_mm_out", "triton_per_fused__softmax_exp_prepare_softmax_online_sqrt_sub_sum_0")
    assert nan_buffer(read("nan_twin.stderr")) == ("NaN", "buf3")


def test_aoti_input_check_message_is_translated() -> None:
    check = input_check(read("cpu_tensor_checked.stderr"))
    assert check is not None and check.index == 0 and check.code == "input.device"
    assert input_check("Error: input_handles[1]: dim value is too large at 0, expected to be <= 64, but got: 100") == check.__class__(
        1, "input.range", 0, "input_handles[1]: dim value is too large at 0, expected to be <= 64, but got: 100"
    )
    assert input_check("Error: input_handles[0]: unmatched dtype, expected: 6(at::kFloat), but got: 7").code == "input.dtype"  # type: ignore[union-attr]
    assert input_check("nothing here") is None


def test_first_sanitizer_error_on_the_recorded_gather_fault() -> None:
    """The first lines of compute-sanitizer's memcheck output as the probe kept them (GPU run 4,
    docs/gpu-validation.md): the planted out-of-bounds index is element 77."""
    err = first_sanitizer_error(read("gather_sanitizer_head.txt"))
    assert err is not None
    assert err.kind == "Invalid __global__ read of size 4 bytes"
    assert err.kernel == "_gather_kernel" and err.location is not None and err.location.endswith(".py:23")
    assert err.thread == "77,0,0" and err.block == "0,0,0"
    assert err.address is not None and err.address.startswith("Access to 0x") and err.address.endswith("is out of bounds")
    assert err.errors is None  # the kept head ends before the ERROR SUMMARY line


def test_sanitizer_error_count_comes_from_the_summary() -> None:
    # synthetic: the summary line's format as compute-sanitizer prints it
    assert first_sanitizer_error(read("gather_sanitizer_head.txt") + "========= ERROR SUMMARY: 4 errors\n").errors == 4  # type: ignore[union-attr]
    assert first_sanitizer_error("========= ERROR SUMMARY: 0 errors") is None


def test_twin_findings_name_the_faulting_kernel() -> None:
    from runtime_probe.ladder.findings import twin_findings

    findings, evidence = twin_findings(
        read("gather_twin.stdout"), read("gather_twin.stderr"), replay_kind="crash", device_type="cuda", crash_signal="SIGABRT"
    )
    (f,) = findings
    assert f.code == "run.illegal_memory_access" and f.evidence["kernel"] == "_gather_kernel_0"
    assert "_gather_kernel_0" in f.message and evidence["running"] == "_gather_kernel_0"


def test_twin_findings_name_the_nan_kernel_and_buffer() -> None:
    from runtime_probe.ladder.findings import twin_findings

    findings, _ = twin_findings(
        read("nan_twin.stdout"), read("nan_twin.stderr"), replay_kind="nonfinite", device_type="cuda", crash_signal=None
    )
    (f,) = findings
    assert f.code == "run.nonfinite" and f.severity.value == "error"
    assert f.evidence["kernel"] == "triton_per_fused__softmax_exp_prepare_softmax_online_sqrt_sub_sum_0"
    assert f.evidence["buffer"] == "buf3"


def test_native_findings_classify_the_load_crash_with_so_facts() -> None:
    from runtime_probe.ladder.findings import native_findings

    so = {"file": "x.wrapper.so", "links_libstdcxx": False, "needed": ["libtorch.so", "libc.so.6"], "glibcxx": None}
    findings, evidence = native_findings(
        read("cuda_gdb_load_crash.txt"),
        stage="load",
        so=so,
        process_libstdcxx="libstdc++.so.6.0.33",
        built_with="g++ 13.3.0",
        unloaded_constants=0,
    )
    (f,) = findings
    assert f.code == "env.cxx_runtime_mismatch"
    assert "static copy of libstdc++" in f.message
    assert evidence["cause"] == "cxx_runtime" and evidence["signal"] == "SIGSEGV"


def test_native_findings_fall_back_to_frames() -> None:
    from runtime_probe.ladder.findings import native_findings

    text = "Thread 1 received signal SIGSEGV\n#0  0x01 in some_function () from libfoo.so\n#1  0x02 in other () from libbar.so\n"
    (f,), evidence = native_findings(text, stage="run", so={}, process_libstdcxx=None, built_with=None, unloaded_constants=0)
    assert f.code == "run.native_frames" and f.found == "some_function  [libfoo.so]" and evidence["cause"] == "unknown"
    (g,), _ = native_findings(text, stage="run", so={}, process_libstdcxx=None, built_with=None, unloaded_constants=2)
    assert g.code == "constants.missing"


def test_a_device_assert_is_not_an_illegal_memory_access() -> None:
    """Issue 13 case 4: Triton's index assert says "out of bounds" too; it is run.device_assert."""
    text = (
        "/tmp/torchinductor/ab.py:18: triton_poi_fused_embedding_0: block: [0,0,0], thread: [5,0,0] "
        "Assertion `index out of bounds: 0 <= tmp4 < 1000` failed.\n"
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    )
    code, line = cuda_error(text) or ("", "")
    assert code == "run.device_assert" and "0 <= tmp4 < 1000" in line
    # the boilerplate that follows every CUDA error is not an assert
    assert cuda_error("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n") is None
