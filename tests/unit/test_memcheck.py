"""compute-sanitizer memcheck of user GPU code (issue 43): the reader on real memcheck output (GPU
run 28, docs/gpu-validation.md), the rule that decides when it runs, the findings it makes, the
user code read off an exported graph, and the manifest's record of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime_probe.ladder import memcheck
from runtime_probe.ladder.readers import first_sanitizer_error, sanitizer_report
from runtime_probe.package.manifest import UserCode, dump_manifest, parse_manifest

DATA = Path(__file__).parent / "data" / "gpu"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_every_record_of_the_real_output_is_read() -> None:
    """The unmasked triton_op at batch 5 (480 floats, one block of 1024) under memcheck with
    the caching allocator off: 4 records printed (--print-limit 4) of 10, host frames cut."""
    report = sanitizer_report(read("memcheck_triton_op_nocaching.txt"))
    assert report.summary == 10  # the total, not the "6 errors were not printed" line after it
    assert [e.thread for e in report.errors] == ["120,0,0", "121,0,0", "122,0,0", "123,0,0"]
    first = report.errors[0]
    assert (first.access, first.size, first.kernel, first.location) == ("read", 16, "_double_unmasked", "user_kernels.py:23")
    assert first.address == "Access to 0x7f53ca800780 is out of bounds"
    assert first.nearest is not None and first.nearest.endswith("of size 1,920 bytes")  # 480 floats
    assert report.kernels() == {"_double_unmasked": 4}
    assert first.errors == 10


def test_the_caching_allocator_hides_the_same_accesses() -> None:
    """The same program with the caching allocator on: memcheck reports 0 errors (why memcheck
    runs with PYTORCH_NO_CUDA_MEMORY_CACHING=1)."""
    report = sanitizer_report(read("memcheck_triton_op_caching.txt"))
    assert report.errors == () and report.summary == 0
    assert memcheck.MEMCHECK_ENV["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"


def test_a_write_and_a_launch_failure_line() -> None:
    text = (
        "========= Invalid __global__ write of size 4 bytes\n"
        "=========     at triton_poi_fused_0+0x70 in /tmp/x.py:9\n"
        "=========     by thread (3,0,0) in block (2,0,0)\n"
        "=========     Address 0x10 is out of bounds\n"
        "========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) on CUDA API call to cuCtxSynchronize.\n"
    )
    report = sanitizer_report(text)
    assert len(report.errors) == 1  # the launch failure is memcheck stopping the launch, no error of its own
    e = report.errors[0]
    assert (e.access, e.size, e.kernel, e.block, e.address) == ("write", 4, "triton_poi_fused_0", "2,0,0", "Address 0x10 is out of bounds")
    assert first_sanitizer_error(text) == e


def test_the_reader_is_linear() -> None:
    """A hostile line (no '+0x', many ' in ') is read once: 200,000 records stay fast."""
    record = "========= Invalid __global__ read of size 4 bytes\n=========     at " + " in " * 2000 + "\n"
    report = sanitizer_report(record * 200)
    assert len(report.errors) == 200


@pytest.mark.parametrize(
    ("flag", "device", "code", "runs", "why"),
    [
        (None, "cuda", UserCode(triton_kernels=("k",)), True, "the program holds Triton kernel(s) k"),
        (None, "cuda", UserCode(custom_ops=("lib::op",)), True, "the program holds custom op(s) lib::op"),
        (None, "cuda", UserCode(), False, "not run: no user Triton kernels"),
        (None, "cuda", None, False, "not run: no user Triton kernels"),
        (True, "cuda", UserCode(), True, "--memcheck"),
        (False, "cuda", UserCode(triton_kernels=("k",)), False, "off (--no-memcheck)"),
        (True, "cpu", UserCode(triton_kernels=("k",)), False, "not run: a CPU package"),
    ],
)
def test_when_memcheck_runs(flag: bool | None, device: str, code: UserCode | None, runs: bool, why: str) -> None:
    got, reason = memcheck.decide(flag, device, code)
    assert got is runs and reason.startswith(why)


def test_the_finding_names_the_kernel_the_sample_and_its_sizes() -> None:
    run = memcheck.MemcheckRun("golden sample max", {"sample": {"id": "max", "symbols": {"batch": 5}}})
    result = memcheck.MemcheckResult(
        "errors", 3.0, ("golden sample example", "golden sample max"), run, sanitizer_report(read("memcheck_triton_op_nocaching.txt"))
    )
    (f,) = memcheck.findings(result, "validate", "build.out_of_bounds", what="the release model")
    assert f.code == "build.out_of_bounds" and f.severity.value == "error"
    assert "golden sample max (batch=5)" in f.message and "read of 16 bytes in kernel _double_unmasked" in f.message
    assert "10 invalid memory access" in f.message
    assert f.evidence["kernel"] == "_double_unmasked" and f.evidence["sizes"] == "batch=5"
    assert "mask=" in (f.hint or "")


def test_no_tool_is_a_warning_and_a_clean_run_no_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memcheck, "tool", lambda: None)
    result = memcheck.run_memcheck(memcheck.MemcheckTarget("p.pt2", "model", 0), [], timeout=5)
    assert result.status == "unavailable"
    (f,) = memcheck.findings(result, "validate", "build.out_of_bounds", what="the release model")
    assert f.code == "env.memcheck_unavailable" and f.severity.value == "warning"
    assert memcheck.findings(memcheck.MemcheckResult("clean", 1.0, ("golden sample example",)), "validate", "x", what="y") == []


def test_the_manifest_records_user_code() -> None:
    from tests.unit.test_manifest import minimal

    data = {**minimal(), "user_code": {"custom_ops": ["lib::op"], "triton_kernels": ["k"], "memcheck": "passed"}}
    m = parse_manifest(json.dumps(data).encode())
    assert m.user_code == UserCode(("lib::op",), ("k",), "passed")
    assert parse_manifest(dump_manifest(m)).user_code == m.user_code
    assert parse_manifest(json.dumps(minimal()).encode()).user_code is None  # a 1.7 manifest: no memcheck


def test_user_code_is_read_off_the_exported_graph() -> None:
    import torch

    from aoti_guard.builder.export.user_code import scan

    @torch.library.custom_op("aoti_guard_test::twice", mutates_args=(), schema="(Tensor x) -> Tensor")
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    class WithOp(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return twice(x).relu()

    class Plain(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2).relu()

    x = torch.randn(3)
    assert scan(torch.export.export(WithOp(), (x,))) == UserCode(custom_ops=("aoti_guard_test::twice",))
    assert scan(torch.export.export(Plain(), (x,))) == UserCode()


def test_the_probe_refuses_both_memcheck_flags() -> None:
    from runtime_probe.probe import run as probe_run
    from runtime_probe.probe.options import ProbeOptions
    from runtime_probe.reporting.errors import UsageError

    with pytest.raises(UsageError, match="--memcheck and --no-memcheck"):
        probe_run._check_options(ProbeOptions(memcheck=True, no_memcheck=True))
    probe_run._check_options(ProbeOptions(no_memcheck=True))  # one of them is fine
