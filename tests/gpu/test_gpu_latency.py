"""--iterations and --save-outputs on a CUDA package (issue 15): each timed call ends with a
device synchronize, so p50/p99 are whole-call times; the saved outputs are CPU safetensors."""

from __future__ import annotations

import pytest

from .conftest import RESULTS, pkg, probe

pytestmark = pytest.mark.gpu


def test_cuda_golden_latency_and_saved_outputs() -> None:
    out = RESULTS / "saved_outputs"
    code, report, text = probe(
        "probe_example_latency", str(pkg("example")), "--fast", "--iterations", "200", "--save-outputs", str(out), preload=True
    )
    assert code == 0, text[-3000:]
    run = next(p for p in report["phases"] if p["name"] == "golden")["detail"]["runs"][0]
    lat = run["latency_ms"]
    assert lat["n"] == 200 and 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]
    assert "latency example: p50" in text
    from safetensors.torch import load_file

    saved = load_file(str(out / "example.outputs.safetensors"))
    assert saved and all(t.device.type == "cpu" for t in saved.values())
