"""The unmasked kernel called once at batch 5 (480 floats, one block of 1024): run under
compute-sanitizer memcheck by scripts/gpu/user_kernels_memcheck.sh, with and without the caching
allocator, to record memcheck's real output (tests/unit/data/gpu/memcheck_*.txt)."""

from __future__ import annotations

import torch

from scripts.gpu.user_kernels import double_masked, double_unmasked

x = torch.randn(5, 96, device="cuda")
for op in (double_masked, double_unmasked):
    try:
        y = op(x)
        torch.cuda.synchronize()
        print(op.__name__ if hasattr(op, "__name__") else op, "ran; max |y - 2x| =", float((y - 2 * x).abs().max()))
    except Exception as exc:  # noqa: BLE001 - memcheck may stop the launch: the fact is what it raised
        print("raised", type(exc).__name__, str(exc)[:200])
