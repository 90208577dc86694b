"""Issue 25: candidate designs of the device-side value check, per call, on the lent GPU.

    PYTHONPATH=. python scripts/gpu/value_designs.py PKG   (PKG: bench/value_check_cost.py's embedding, built for CUDA)

Each arm wraps the bare AOTI call of PKG (ids int64 [8, 12]) with one design's extra work; blocks
of 200 calls end with a device sync; 20 interleaved rounds. Prints the median µs per call and the
ratio to the bare call. Exploration for docs/benchmarks.md, not a test.
"""

from __future__ import annotations

import statistics
import sys
import timeit

import torch

lo, hi = 0, 999
model = torch._inductor.aoti_load_package(sys.argv[1])
run = model.loader.boxed_run
ids = torch.randint(0, 1000, (8, 12), device="cuda")
nan = float("nan")


def bare() -> None:
    run([ids])


def eager5() -> None:  # the first "device": clamp, eq, all, where, foreach_mul
    safe = ids.clamp(lo, hi)
    ok = torch.eq(safe, ids).all()
    out = run([safe])
    torch._foreach_mul(out, torch.where(ok, 1.0, nan))


def eager4() -> None:  # clamp, eq, all, then where(ok, out, nan) per output
    safe = ids.clamp(lo, hi)
    ok = torch.eq(safe, ids).all()
    out = run([safe])
    [torch.where(ok, o, nan) for o in out]


def clamp_only() -> None:  # the floor of any clamping design: one op
    run([ids.clamp(lo, hi)])


def sync_check() -> None:  # the host read
    a, b = torch.aminmax(ids)
    if int(a) < lo or int(b) > hi:
        raise ValueError
    run([ids])


ARMS = {"bare": bare, "clamp_only": clamp_only, "eager4": eager4, "eager5": eager5, "sync": sync_check}
try:
    import triton
    import triton.language as tl

    @triton.jit
    def _clamp_flag(ids_ptr, out_ptr, factor_ptr, n, lo, hi, BLOCK: tl.constexpr):
        bad = tl.zeros((BLOCK,), dtype=tl.int32)
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n
            v = tl.load(ids_ptr + offs, mask=m, other=lo)
            c = tl.minimum(tl.maximum(v, lo), hi)
            tl.store(out_ptr + offs, c, mask=m)
            bad += (c != v).to(tl.int32)
        total = tl.sum(bad, axis=0)
        tl.store(factor_ptr, tl.where(total == 0, 1.0, float("nan")))

    factor = torch.empty((), device="cuda")

    def triton2() -> None:  # one fused launch (clamp + flag -> factor), then one multiply
        safe = torch.empty_like(ids)
        _clamp_flag[(1,)](ids, safe, factor, ids.numel(), lo, hi, BLOCK=1024)
        out = run([safe])
        [o.mul(factor) for o in out]

    ARMS["triton2"] = triton2
except Exception as exc:  # noqa: BLE001
    print("triton unavailable:", exc)

static_ids = ids.clone()
static_safe = torch.empty_like(ids)
static_factor = torch.empty((), device="cuda")
stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    for _ in range(3):  # warm-up before capture
        static_safe.copy_(static_ids.clamp(lo, hi))
        static_factor.copy_(torch.where(torch.eq(static_safe, static_ids).all(), 1.0, nan))
torch.cuda.current_stream().wait_stream(stream)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_safe.copy_(static_ids.clamp(lo, hi))
    static_factor.copy_(torch.where(torch.eq(static_safe, static_ids).all(), 1.0, nan))


def graph3() -> None:  # copy in, replay the captured clamp + flag, one multiply (not thread-safe as is)
    static_ids.copy_(ids)
    graph.replay()
    out = run([static_safe])
    [o.mul(static_factor) for o in out]


ARMS["graph3"] = graph3
for fn in ARMS.values():
    for _ in range(50):
        fn()
torch.cuda.synchronize()
us: dict[str, list[float]] = {k: [] for k in ARMS}
for r in range(20):
    for k, fn in ARMS.items() if r % 2 == 0 else reversed(list(ARMS.items())):
        t = timeit.timeit("fn(); sync()", globals={"fn": fn, "sync": torch.cuda.synchronize}, number=1)
        t = timeit.timeit("for _ in range(200): fn()\nsync()", globals={"fn": fn, "sync": torch.cuda.synchronize}, number=1) / 200
        us[k].append(t * 1e6)
base = statistics.median(us["bare"])
print(f"{torch.cuda.get_device_name()} torch {torch.__version__}")
print("| arm | median µs | / bare |")
print("| --- | --- | --- |")
for k, v in us.items():
    print(f"| `{k}` | {statistics.median(v):.1f} | {statistics.median(v) / base:.3f} |")
# per-op launch cost, alone
for name, stmt in {
    "clamp": lambda: ids.clamp(lo, hi),
    "eq+all": lambda: torch.eq(ids, ids).all(),
    "where(scalar)": lambda: torch.where(factor > 0, 1.0, nan),
    "mul": lambda: ids.mul(2),
}.items():
    t = timeit.timeit(stmt, number=2000) / 2000
    torch.cuda.synchronize()
    print(f"op {name}: {t * 1e6:.1f} µs")
