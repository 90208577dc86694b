"""A CUDA build compares its outputs on the GPU, a chunk at a time (runtime_probe.runtime.numerics
``device``): the answers must be the CPU's."""

from __future__ import annotations

import pytest
import torch

from aoti_guard.builder.golden import ToleranceStats
from runtime_probe.runtime import numerics

pytestmark = pytest.mark.gpu


def test_comparisons_on_the_gpu_give_the_cpu_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(3, 1000, 700, generator=g)
    out = ref + 1e-4 * torch.randn(3, 1000, 700, generator=g)
    out[1, 2, 3], out[2, 5, 6], ref[2, 5, 6] = float("nan"), float("inf"), float("inf")
    out[0, 999, 1] += 2.0
    for chunk in (numerics.CHUNK, 100_003):
        monkeypatch.setattr(numerics, "CHUNK", chunk)
        cpu = numerics.stats(out, ref, atol=1e-5, rtol=1e-5)
        gpu = numerics.stats(out, ref, atol=1e-5, rtol=1e-5, device="cuda")
        assert gpu == cpu
    monkeypatch.undo()
    assert numerics.max_abs_diff(out, ref, device="cuda") == numerics.max_abs_diff(out, ref)
    assert numerics.max_rel_diff(out, ref, device="cuda") == numerics.max_rel_diff(out, ref)
    finite_out, finite_ref = out.nan_to_num(0.0, 0.0), ref.nan_to_num(0.0, 0.0)
    assert numerics.rmse(finite_out, finite_ref, device="cuda") == pytest.approx(numerics.rmse(finite_out, finite_ref), rel=1e-12)
    on_gpu, on_cpu = ToleranceStats("y", "float32", "cuda"), ToleranceStats("y", "float32")
    on_gpu.add(out, ref)
    on_cpu.add(out, ref)
    assert on_gpu.tolerance() == on_cpu.tolerance()


def test_a_cuda_comparison_judges_as_the_cpu_one() -> None:
    """Comparison(device="cuda") stages the sample's tensors on the GPU once (compare._staged)."""
    from aoti_guard.builder.golden import Sample
    from aoti_guard.builder.validate.compare import Comparison
    from aoti_guard.builder.validate.tolerance import ToleranceRule
    from runtime_probe.package.manifest import IOContract, OutputSpec, TensorSpec

    contract = IOContract(
        params=(), inputs=(), outputs=(OutputSpec("y", TensorSpec("float32", (64, 999), (999, 1), True, "cuda")),), symbols=()
    )
    g = torch.Generator().manual_seed(1)
    eager = torch.randn(64, 999, generator=g)
    compiled = eager + 1e-6 * torch.randn(64, 999, generator=g)
    compiled[3, 4] += 1.0  # fails allclose, and is farther from float64 than eager
    ref64 = eager.double()
    sample = Sample("max", {}, [], [eager])
    tables = []
    for device in (None, "cuda"):
        comparison = Comparison(contract, allow_nonfinite=False, tolerance=ToleranceRule(), device=device)
        comparison.add(sample, [compiled], [ref64])
        result = comparison.finish()
        tables.append((result.table, [f.code for f in result.findings], result.tolerances))
    assert tables[0] == tables[1]
    assert tables[0][1] == ["build.validation_failed"]
