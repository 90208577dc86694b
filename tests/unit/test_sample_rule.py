"""One rule for how a golden sample is judged (runtime_probe/golden/sample_rule.py), applied by the
build (compare.py) and the probe (golden_phase.py, the child's comparison) alike: NaN/Inf that match
eager's are a half-precision edge sample's answer (and every sample's with --allow-nonfinite), and
an edge sample keeps a tolerance of its own instead of widening the output's shared one."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from aoti_guard.builder.golden import Sample  # noqa: E402
from aoti_guard.builder.validate.compare import Comparison  # noqa: E402
from aoti_guard.builder.validate.golden_store import GoldenStore  # noqa: E402
from aoti_guard.builder.validate.tolerance import ToleranceRule  # noqa: E402
from runtime_probe.child import ops  # noqa: E402
from runtime_probe.golden.sample_rule import sample_rule  # noqa: E402
from runtime_probe.package.manifest import (  # noqa: E402
    InputSpec,
    IOContract,
    OutputSpec,
    TensorSpec,
    Tolerance,
    dump_manifest,
    parse_manifest,
)
from runtime_probe.probe import golden_phase  # noqa: E402

from .test_manifest import minimal  # noqa: E402


def test_the_rule_matches_nonfinite_on_edge_samples_and_with_allow_nonfinite_and_keeps_edge_tolerances_apart() -> None:
    assert sample_rule("edge-overflow", allow_nonfinite=False).matched_nonfinite
    assert sample_rule("edge-overflow", allow_nonfinite=False).own_tolerance
    assert not sample_rule("mid", allow_nonfinite=False).matched_nonfinite
    assert sample_rule("mid", allow_nonfinite=True).matched_nonfinite
    assert not sample_rule("mid", allow_nonfinite=True).own_tolerance


# --- the build: an edge sample does not widen the output's stored tolerance -------------------


def _bf16_contract() -> IOContract:
    spec = TensorSpec("bfloat16", (64,), (1,), True, "cpu")
    return IOContract((), (InputSpec("a", "a", "tensor", 0, spec),), (OutputSpec("y", spec),), ())


def _add_minus(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(eager: (a+b)-b rounded at each op in bfloat16, compiled: kept in float32 as Inductor
    does, float64) for one sample."""
    eager = (a + b) - b
    compiled = ((a.float() + b.float()) - b.float()).to(torch.bfloat16)
    return eager, compiled, (a.double() + b.double()) - b.double()


def _stored(samples: list[tuple[str, torch.Tensor, torch.Tensor]]) -> Any:
    comparison = Comparison(_bf16_contract(), allow_nonfinite=False, tolerance=ToleranceRule())
    for sid, a, b in samples:
        eager, compiled, fp64 = _add_minus(a, b)
        comparison.add(Sample(sid, {}, [], outputs=[eager]), [compiled], [fp64])
    return comparison.finish()


def test_an_edge_sample_keeps_its_own_tolerance_and_the_ordinary_samples_keep_theirs() -> None:
    gen = torch.Generator().manual_seed(0)
    ordinary = [(sid, torch.randn(64, generator=gen).bfloat16(), torch.randn(64, generator=gen).bfloat16()) for sid in ("example", "mid")]
    big = (torch.rand(64, generator=gen) * 256 + 1).bfloat16()  # the edge-rounding recipe's span: (a+b) rounds away a's bits
    edge = ("edge-rounding", (torch.rand(64, generator=gen) + 0.01).bfloat16(), big)
    before = _stored(ordinary)  # what the output stored before edge samples existed
    after = _stored([*ordinary, edge])
    assert [t.atol for t in after.tolerances] == [t.atol for t in before.tolerances]
    assert after.tolerances[0].origin == before.tolerances[0].origin and "edge" not in str(after.tolerances[0].origin)
    own = after.sample_tolerances["edge-rounding"][0]
    assert own.output == "y" and own.atol > 10 * after.tolerances[0].atol, "the edge sample's error is its own"
    assert "on sample edge-rounding" in str(own.origin)
    assert not [f for f in after.findings if f.code == "build.tolerance_wide"], "no probe check of ordinary samples was widened"


def test_the_golden_store_records_the_edge_samples_own_tolerance_on_its_record_whole_or_compact() -> None:
    contract = _bf16_contract()
    own = {"edge-max": [Tolerance("y", 0.5, 0.016)]}
    shared = [Tolerance("y", 0.01, 0.016)]
    for cap in (1 << 20, 0):  # whole under the cap, compact over it
        store = GoldenStore(contract, cap)
        for sid in ("example", "edge-max"):
            store.keep(Sample(sid, {}, [], outputs=[torch.full((64,), 2.0, dtype=torch.bfloat16)]))
        payload = store.payload(shared, own)
        assert payload is not None
        _, whole, compact = payload
        records = {r.id: r for r in [*whole, *compact]}
        assert records["example"].tolerances is None and records["edge-max"].tolerances == tuple(own["edge-max"])
    digest = next(c for c in compact if c.id == "edge-max").outputs[0]
    plain = next(c for c in compact if c.id == "example").outputs[0]
    assert digest.minmax_tol > plain.minmax_tol, "a compact edge sample's statistics follow its own tolerance"


# --- the manifest and the probe ------------------------------------------------------------


def _manifest(*, allow_nonfinite: bool = False) -> Any:
    m = copy.deepcopy(minimal())
    m["golden"]["samples"] = [
        {"id": "example", "inputs": {"x": "s0.in.x"}, "outputs": {"output": "s0.out.output"}},
        {
            "id": "edge-overflow",
            "inputs": {"x": "s1.in.x"},
            "outputs": {"output": "s1.out.output"},
            "tolerances": [{"output": "output", "atol": 0.5, "rtol": 1e-3}],
        },
    ]
    m["golden"]["allow_nonfinite"] = allow_nonfinite
    return parse_manifest(json.dumps(m).encode())


def test_the_manifest_keeps_a_samples_own_tolerance_and_allow_nonfinite_through_a_round_trip() -> None:
    m = parse_manifest(dump_manifest(_manifest(allow_nonfinite=True)))
    assert m.golden is not None and m.golden.allow_nonfinite
    assert [t.atol for t in m.golden.tolerances_of("edge-overflow")] == [0.5]
    assert m.golden.tolerances_of("example") == m.golden.tolerances == m.golden.tolerances_of("no-such-sample")


def _probe_judges(m: Any, sample_id: str, out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    """The probe's parent arguments for ``sample_id`` (golden_phase), then the child's comparison
    of ``out`` with ``ref`` under them (child/ops.py): what `aoti-guard probe` decides."""
    shared = SimpleNamespace(manifest=m, path="pkg.pt2", options=SimpleNamespace(inputs_device=None))
    dev = SimpleNamespace(golden_valid=True, device="cpu")
    record = next(s for s in m.golden.samples if s.id == sample_id)
    sample = {"id": record.id, "inputs": record.inputs, "outputs": record.outputs, "symbols": {}}
    args = golden_phase._run_args(shared, dev, "golden.safetensors", sample, user=False)  # type: ignore[arg-type]
    req = ops.RunRequest(**args)
    return ops._judged_output(req, "output", out, {record.outputs["output"]: ref})


def test_the_probe_passes_an_edge_sample_whose_nan_is_eagers_and_fails_one_elsewhere() -> None:
    ref = torch.tensor([0.0, math.nan, math.inf, 0.0], dtype=torch.float16)  # y - y after x*x overflowed
    m = _manifest()
    same = _probe_judges(m, "edge-overflow", ref.clone(), ref)
    assert same["passed"] is True, same
    moved = _probe_judges(m, "edge-overflow", torch.tensor([math.nan, 0.0, math.inf, 0.0], dtype=torch.float16), ref)
    assert moved["passed"] is False
    finite = _probe_judges(m, "edge-overflow", torch.tensor([0.0, 0.0, math.inf, 0.0], dtype=torch.float16), ref)
    assert finite["passed"] is False, "a finite value where eager holds NaN"


def test_the_probe_holds_an_edge_sample_to_its_own_tolerance_and_the_others_to_the_shared_one() -> None:
    m = _manifest()
    ref = torch.zeros(4, dtype=torch.float16)
    off = torch.full((4,), 0.25, dtype=torch.float16)
    assert _probe_judges(m, "edge-overflow", off, ref)["passed"] is True
    assert _probe_judges(m, "example", off, ref)["passed"] is False


def test_an_ordinary_samples_nan_is_matched_only_in_an_allow_nonfinite_build() -> None:
    ref = torch.tensor([1.0, math.nan])
    assert _probe_judges(_manifest(), "example", ref.clone(), ref)["passed"] is False
    assert _probe_judges(_manifest(allow_nonfinite=True), "example", ref.clone(), ref)["passed"] is True
