"""Validation one sample at a time (builder/validate/run.py): a sample's eager, float64 and
compiled outputs are gone before the next sample's are made, and only the samples the package
stores keep their eager outputs, under the cap.

Holding every sample's outputs at once is what made gpt2 at full size (logits of 3.3 GB per
sample in float32) run the GPU machine out of memory and disk (docs/zoo.md)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import torch

from aoti_guard.builder.golden import Sample
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.validate.child_run import ChildRun
from aoti_guard.builder.validate.golden_store import GoldenStore
from aoti_guard.builder.validate.run import Validation, _Steps, validate_each
from aoti_guard.builder.validate.subject import Subject
from aoti_guard.builder.validate.tolerance import ToleranceRule
from runtime_probe.package.manifest import GoldenSample, InputSpec, IOContract, OutputSpec, TensorSpec

MB = 1 << 20


class _Recording:
    """Steps that make a big tensor per output and watch which of them are still alive."""

    def __init__(self, stored: set[str], fail_eager: set[str] = frozenset(), raise_compiled: set[str] = frozenset()) -> None:
        self.stored, self.fail_eager, self.raise_compiled = stored, fail_eager, raise_compiled
        self.events: list[str] = []
        self.alive: list[tuple[str, weakref.ref[torch.Tensor]]] = []
        self.seen_alive: dict[str, list[str]] = {}

    def _make(self, s: Sample, what: str) -> torch.Tensor:
        t = torch.zeros(MB)
        self.alive.append((f"{s.id}.{what}", weakref.ref(t)))
        return t

    def eager(self, s: Sample) -> bool:
        gc.collect()
        self.seen_alive[s.id] = [name for name, ref in self.alive if ref() is not None]
        self.events.append(f"eager {s.id}")
        if s.id in self.fail_eager:
            return False
        s.outputs = [self._make(s, "eager")]
        return True

    def fp64(self, s: Sample) -> list[Any] | None:
        self.events.append(f"fp64 {s.id}")
        return [self._make(s, "fp64")]

    def compiled(self, s: Sample) -> list[Any] | None:
        self.events.append(f"compiled {s.id}")
        return None if s.id in self.raise_compiled else [self._make(s, "compiled")]

    def judge(self, s: Sample, compiled: list[Any], refs64: list[Any] | None) -> None:
        assert refs64 is not None
        self.events.append(f"judge {s.id}")

    def done(self, s: Sample) -> None:
        self.events.append(f"done {s.id}")
        if s.id not in self.stored:
            s.outputs = []

    def stopped(self) -> bool:
        return False


def _samples(*ids: str) -> list[Sample]:
    return [Sample(i, {"batch": n + 1}, [torch.zeros(2)]) for n, i in enumerate(ids)]


def test_each_sample_is_validated_and_dropped_before_the_next_begins() -> None:
    steps = _Recording(stored={"example"})
    accepted = validate_each(_samples("example", "min", "max", "mid"), steps)
    assert [s.id for s in accepted] == ["example", "min", "max", "mid"]
    assert steps.events[:5] == ["eager example", "fp64 example", "compiled example", "judge example", "done example"]
    assert steps.events.index("done min") < steps.events.index("eager max")
    # when a sample begins, only the stored example's eager outputs are still alive
    assert steps.seen_alive["min"] == ["example.eager"]
    assert steps.seen_alive["max"] == ["example.eager"]
    assert steps.seen_alive["mid"] == ["example.eager"]


def test_a_dropped_or_failed_sample_does_not_stop_the_others() -> None:
    steps = _Recording(stored=set(), fail_eager={"min"}, raise_compiled={"max"})
    accepted = validate_each(_samples("example", "min", "max", "mid"), steps)
    assert [s.id for s in accepted] == ["example", "max", "mid"]
    assert "fp64 min" not in steps.events and "judge max" not in steps.events
    assert "judge mid" in steps.events and steps.seen_alive["mid"] == []


def _steps(cap: int) -> tuple[_Steps, Validation]:
    contract = IOContract(params=(), inputs=(), outputs=(OutputSpec("out", TensorSpec("float32", (4,), (1,), True, "cpu")),), symbols=())
    index = [GoldenSample(i, {}, {}, {}) for i in ("example", "min", "max")]
    run = ChildRun(None, "unused", index, contract, "cpu", None, "unused", 1.0)  # type: ignore[arg-type]
    out = Validation()
    subject = Subject(None, None, contract, {}, BuildOptions(output="unused.pt2", golden_max_bytes=cap), ToleranceRule())
    return _Steps(subject, run, None, None, out), out


def test_the_store_keeps_samples_in_order_under_the_cap_and_the_rest_compact() -> None:
    steps, out = _steps(cap=3000)
    samples = [Sample(i, {}, [torch.zeros(100)], [torch.zeros(n)]) for i, n in (("example", 100), ("min", 1000), ("max", 50))]
    for s in samples:  # sizes: 800, 4400, 600 bytes
        steps.done(s)
    assert [s.id for s in steps.store.full] == ["example", "max"]
    assert [c.sample.id for c in steps.store.compact] == ["min"]  # over the cap: kept compact, not dropped
    assert samples[1].outputs == []  # not stored whole: its eager outputs are let go
    assert [r["stored"] for r in steps.store.rows] == ["full", "compact", "full"]
    assert not [f for f in out.findings if f.code == "build.sample_dropped"]


def test_a_sample_whose_captured_inputs_alone_pass_the_cap_is_dropped_and_says_why() -> None:
    contract = IOContract(
        params=(),
        inputs=(InputSpec("x", "x", "tensor", 0, TensorSpec("float32", (100,), (1,), True, "cpu")),),
        outputs=(OutputSpec("out", TensorSpec("float32", (4,), (1,), True, "cpu")),),
        symbols=(),
    )
    store = GoldenStore(contract, cap=300)
    user = Sample("user0", {}, [torch.zeros(100)], [torch.zeros(4)], origin="user")  # 400 bytes of captured inputs
    finding = store.keep(user)
    assert finding is not None and finding.code == "build.sample_dropped"
    assert "captured inputs alone (400 bytes)" in finding.message
    assert store.rows == [
        {"sample": "user0", "origin": "user", "stored": "dropped", "why": "its captured inputs alone (400 bytes) would pass it"}
    ]


def test_each_sample_reports_where_its_time_went() -> None:
    steps = _Recording(stored=set(), fail_eager={"min"})
    timings: list[dict[str, Any]] = []
    validate_each(_samples("example", "min", "max"), steps, timings)
    assert [t["sample"] for t in timings] == ["example", "min", "max"]
    assert set(timings[0]) == {"sample", "eager_s", "fp64_s", "compiled_s", "compare_s"}
    assert set(timings[1]) == {"sample", "eager_s"}  # dropped by eager: nothing else ran
    assert all(v >= 0 for t in timings for k, v in t.items() if k != "sample")
