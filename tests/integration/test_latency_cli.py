"""``probe --iterations/--duration/--warmup`` on a real package: the timed loop runs for the asked
time, the JSON and the text carry the same statistics, and an impossible duration is a usage error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.child.ops import THROUGHPUT_ROUNDS
from tests.schemas import validate

from .conftest import Built, run_cli, run_probe

pytestmark = pytest.mark.integration


def test_duration_times_for_that_long(static_pkg: Built) -> None:
    proc = run_probe(str(static_pkg.path), "--fast", "--duration", "0.5", "--warmup", "3", "--json", "-")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    validate("probe-report", report)
    lat = next(p for p in report["phases"] if p["name"] == "golden")["detail"]["runs"][0]["latency_ms"]
    assert lat["seconds"] >= 0.5 and lat["warmup"] == 3 and lat["n"] >= 100  # a static 8x16 model: microseconds a call
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["max"] and not lat["omitted"]
    assert lat["throughput_per_s"] == pytest.approx(lat["n"] / lat["seconds"], rel=0.01)
    assert abs(lat["cv"] - lat["std"] / lat["mean"]) < 0.01
    line = next(x for x in proc.stderr.splitlines() if "latency example:" in x)
    assert f"{lat['n']} runs after 3 warm-up" in line and "calls/s" in line and "±" in line
    assert (
        isinstance(lat["threads"], int) and lat["threads"] >= 1 and line.endswith(f"{lat['threads']} thread" + "s" * (lat["threads"] != 1))
    )
    assert ("warning: timings vary" in proc.stderr) == lat["unstable"]


def test_duration_must_fit_the_timeout(static_pkg: Built) -> None:
    proc = run_probe(str(static_pkg.path), "--duration", "30", "--timeout", "10")
    assert proc.returncode == 2 and "--duration 30 must be above 0 and below --timeout 10" in proc.stderr
    proc = run_cli("probe", str(static_pkg.path), "--duration", "1", "--image", "some-image:1")
    assert proc.returncode == 2 and "--duration is not supported with --image" in proc.stderr


def test_shapes_repeated_times_every_set(mixed_pkg: Built, tmp_path: Path) -> None:
    """--shapes twice runs and times both sets (it kept the last alone, silently), each named and
    labelled with its sizes in the JSON and on its latency line, each with its own saved inputs."""
    saved = tmp_path / "saved"
    raw = tmp_path / "raw.json"
    argv = ["--fast", "--shapes", "x:2x8", "--shapes", "x:16x8", "--iterations", "3", "--save-inputs", str(saved), "--json", "-"]
    argv += ["--latency-raw", str(raw)]
    proc = run_probe(str(mixed_pkg.path), *argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = next(p for p in json.loads(proc.stdout)["phases"] if p["name"] == "golden")["detail"]["runs"]
    shaped = {r["sample"]: r for r in runs if r.get("shapes")}
    assert {k: v["shapes"] for k, v in shaped.items()} == {"shapes1": "x:2x8,ids:2,scale:8", "shapes2": "x:16x8,ids:16,scale:8"}
    assert shaped["shapes1"]["outputs"]["output[0]"]["shape"] == [2, 8] and shaped["shapes2"]["outputs"]["output[0]"]["shape"] == [16, 8]
    assert all(r["latency_ms"]["n"] == 3 for r in shaped.values())
    assert "latency shapes1 (x:2x8,ids:2,scale:8): " in proc.stderr and "latency shapes2 (x:16x8,ids:16,scale:8): " in proc.stderr
    assert sorted(p.name for p in saved.glob("shapes*")) == ["shapes1.inputs.safetensors", "shapes2.inputs.safetensors"]
    # --latency-raw: every timed call's seconds, per run, named as on its line; the report keeps the statistics alone
    written = json.loads(raw.read_text())
    assert written["unit"] == "s" and set(written["runs"]) == {"example", "shapes1", "shapes2"}
    for name, entry in written["runs"].items():
        lat = next(r for r in runs if r["sample"] == name)["latency_ms"]
        assert len(entry["times_s"]) == lat["n"] == 3 and entry["threads"] == lat["threads"] and entry["device"] == "cpu"
        assert min(entry["times_s"]) * 1000 == pytest.approx(lat["min"], rel=1e-3, abs=1e-6) and "times_s" not in lat
    assert written["runs"]["shapes2"]["shapes"] == "x:16x8,ids:16,scale:8" and "shapes" not in written["runs"]["example"]


def test_shapes_runs_and_times_other_sizes(mixed_pkg: Built, tmp_path: Path) -> None:
    """--shapes x:16x8 on the mixed model (batch 2..32): ids follows as 16; the run is timed and its
    inputs have the sizes asked for; a size outside the range is the contract's finding, with its hint."""
    saved = tmp_path / "saved"
    proc = run_probe(str(mixed_pkg.path), "--fast", "--shapes", "x:16x8", "--iterations", "20", "--save-inputs", str(saved), "--json", "-")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = next(p for p in json.loads(proc.stdout)["phases"] if p["name"] == "golden")["detail"]["runs"]
    shaped = next(r for r in runs if r["sample"] == "shapes")
    assert shaped["latency_ms"]["n"] == 20 and shaped["outputs"]["output[0]"]["shape"] == [16, 8]
    from safetensors.torch import load_file

    inputs = load_file(str(saved / "shapes.inputs.safetensors"))
    assert tuple(inputs["x"].shape) == (16, 8) and tuple(inputs["ids"].shape) == (16,)
    assert "latency shapes (x:16x8,ids:16,scale:8): p50 " in proc.stderr and shaped["shapes"] == "x:16x8,ids:16,scale:8"
    refused = run_probe(str(mixed_pkg.path), "--fast", "--shapes", "x:40x8", "--json", "-")
    assert refused.returncode == 1
    golden = next(p for p in json.loads(refused.stdout)["phases"] if p["name"] == "golden")
    (finding,) = golden["findings"]
    assert finding["code"] == "input.range" and finding["message"].startswith("--shapes: x: dim 0 is 40, above the maximum 32")
    assert "--dynamic x:0=batch:2..40" in finding["hint"]
    bad = run_probe(str(mixed_pkg.path), "--shapes", "x:4")
    assert bad.returncode == 2 and "x has 2 dims in the contract, 1 given" in bad.stderr


def test_shapes_makes_its_inputs_as_the_build_makes_golden_samples(example_pkg: Built, tmp_path: Path) -> None:
    """--shapes on the example (a bool mask, mostly True): the mask is generated as the build's golden
    samples are (runtime_probe/golden/recipe.py), rows padded on the right, on the left and not at
    all in turn, not the example's values resampled (which left the padding path untried)."""
    saved = tmp_path / "saved"
    proc = run_probe(str(example_pkg.path), "--fast", "--shapes", "x:12x16", "--save-inputs", str(saved), "--json", "-")
    assert proc.returncode == 0, proc.stderr[-3000:]
    from safetensors.torch import load_file

    inputs = load_file(str(saved / "shapes.inputs.safetensors"))
    mask = inputs["mask"]
    assert tuple(mask.shape) == (12, 32) and tuple(inputs["x"].shape) == (12, 16)
    for row in (0, 3, 6, 9):  # padded on the right: kept from the start, padding at the end
        assert bool(mask[row, 0]) and not bool(mask[row, -1]), mask[row]
    for row in (1, 4, 7, 10):  # padded on the left
        assert not bool(mask[row, 0]) and bool(mask[row, -1]), mask[row]
    for row in (2, 5, 8, 11):  # not padded
        assert bool(mask[row].all()), mask[row]


def test_threads_measures_each_count_and_tries_the_remedy(static_pkg: Built) -> None:
    """--threads 2 on a real package: calls/s for 1 and 2 concurrent callers, their scaling, the
    intra-op threads and cores beside them, and, when 2 callers do not scale, the same 2 callers on
    the package loaded with 2 runners (the verdict's logic is tests/unit/test_throughput.py's)."""
    proc = run_probe(str(static_pkg.path), "--fast", "--threads", "2", "--duration", "0.3", "--verbose", "--json", "-")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    validate("probe-report", report)
    golden = next(p for p in report["phases"] if p["name"] == "golden")
    tp = golden["detail"]["throughput"]
    # each count: its best of THROUGHPUT_ROUNDS interleaved windows of 0.3 s / rounds
    window = 0.3 / THROUGHPUT_ROUNDS
    assert [c["callers"] for c in tp["counts"]] == [1, 2] and all(c["calls"] > 0 and c["seconds"] >= window for c in tp["counts"])
    assert len(tp["counts"][1]["per_caller"]) == 2 and tp["scaling"]["1"] == 1.0 and tp["runners"] == 1
    assert tp["cores"] >= 1 and tp["intra_op_threads"] >= 1 and tp["sample"] == "golden sample example"
    codes = {f["code"] for f in golden["findings"]}
    if tp["scaling"]["2"] > 1.2:
        assert "remedy" not in tp and not codes & {"golden.throughput_serialised", "golden.throughput_saturated"}
    else:
        assert tp["remedy"]["runners"] == 2 and tp["remedy"]["calls_per_s"] > 0
        assert codes & {"golden.throughput_serialised", "golden.throughput_saturated"}
        assert "  with 2 runners: " in proc.stderr
    assert "throughput golden sample example: 1 caller " in proc.stderr and "2 callers " in proc.stderr


def test_threads_is_checked_before_any_work(static_pkg: Built) -> None:
    proc = run_probe(str(static_pkg.path), "--threads", "2,many")
    assert proc.returncode == 2 and "--threads: 'many' is not a whole number of callers" in proc.stderr
    proc = run_probe(str(static_pkg.path), "--verify-only", "--threads", "2")
    assert proc.returncode == 2 and "--threads needs the model loaded" in proc.stderr


def test_guarded_loader_takes_more_runners(static_pkg: Built) -> None:
    """runtime_probe.load(..., num_runners=2): the remedy the finding names, called from two threads at once."""
    import threading

    import torch

    import runtime_probe

    model = runtime_probe.load(static_pkg.path, num_runners=2)
    x = torch.randn(8, 16)
    expected = model(x)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(model(x))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and all(torch.equal(_first(g), _first(expected)) for g in got)
    with pytest.raises(runtime_probe.UsageError, match="num_runners must be a whole number of at least 1"):
        runtime_probe.load(static_pkg.path, num_runners=0)


def _first(out: Any) -> Any:
    import torch

    return out if isinstance(out, torch.Tensor) else out[0]
