"""Real reports against the shipped JSON Schemas; --strict on a plain package; torch's warnings
kept off the terminal of a real build."""

from __future__ import annotations

import json
import re
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

from ..schemas import validate
from .conftest import Built, run_cli, run_probe

pytestmark = pytest.mark.integration


def test_build_report_is_schema_valid_and_holds_torch_warnings_off_the_terminal(example_pkg: Built) -> None:
    assert example_pkg.returncode == 0 and example_pkg.report is not None
    validate("build-report", example_pkg.report)
    assert "Warning" not in example_pkg.stderr  # FutureWarning LeafSpec, the TF32 hint: not on the terminal
    assert all(isinstance(line, str) for line in example_pkg.report["extra"].get("log", []))


def test_passing_and_failing_probe_reports_are_schema_valid(example_pkg: Built, tmp_path: Path) -> None:
    proc = run_probe(str(example_pkg.path), "--json", "-", "-q")
    assert proc.returncode == 0
    validate("probe-report", json.loads(proc.stdout))
    broken = tmp_path / "broken.pt2"
    data = bytearray(example_pkg.path.read_bytes())
    # A byte of the largest entry's body: the middle of the file once fell on a local header's
    # flag word, which the probe did not read then (it does now: tests/unit/test_archive.py).
    with zipfile.ZipFile(example_pkg.path) as zf:
        largest = max(zf.infolist(), key=lambda i: i.compress_size)
    name_len, extra_len = struct.unpack("<2H", data[largest.header_offset + 26 : largest.header_offset + 30])
    data[largest.header_offset + 30 + name_len + extra_len + largest.compress_size // 2] ^= 0xFF
    broken.write_bytes(bytes(data))
    proc = run_probe(str(broken), "--json", "-", "-q")
    assert proc.returncode == 1
    validate("probe-report", json.loads(proc.stdout))


def test_strict_fails_a_plain_package_that_passes_without_it(plain_pkg: Path) -> None:
    lax = run_probe(str(plain_pkg), "--fast", "--json", "-", "-q")
    report = json.loads(lax.stdout)
    warnings = [f["code"] for p in report["phases"] for f in p["findings"] if f["severity"] == "warning"]
    assert lax.returncode == 0 and warnings, lax.stderr
    strict = run_probe(str(plain_pkg), "--fast", "--strict", "--json", "-")
    report = json.loads(strict.stdout)
    assert strict.returncode == 1 and report["exit_code"] == 1 and report["strict"] is True
    assert "(--strict: warnings fail)" in strict.stderr
    validate("probe-report", report)
    via_click = run_cli("probe", str(plain_pkg), "--fast", "--strict", "-q")
    assert via_click.returncode == 1


@pytest.mark.parametrize("which", ["built", "plain", "damaged"])
def test_inspect_json_is_schema_valid(which: str, example_pkg: Built, plain_pkg: Path, tmp_path: Path) -> None:
    path = {"built": example_pkg.path, "plain": plain_pkg}.get(which)
    if path is None:
        path = tmp_path / "damaged.pt2"
        shutil.copyfile(example_pkg.path, path)
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size // 2)
    proc = run_cli("inspect", str(path), "--json")
    data = json.loads(proc.stdout)
    validate("inspect", data)
    assert data["schema_version"] == "1.0"
    if which == "plain":
        assert "manifest" not in data and data["missing"]
    if which == "built":
        assert data["manifest"]["io"] and not data["problems"]


def test_iterations_latency_and_saved_golden_io(example_pkg: Built, tmp_path: Path) -> None:
    ins, outs = tmp_path / "in", tmp_path / "out"
    proc = run_probe(
        str(example_pkg.path), "--fast", "--iterations", "7", "--save-inputs", str(ins), "--save-outputs", str(outs), "--json", "-"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    validate("probe-report", report)
    golden = next(p for p in report["phases"] if p["name"] == "golden")
    latency = golden["detail"]["runs"][0]["latency_ms"]
    assert latency["n"] == 7 and 0 < latency["min"] <= latency["p50"] <= latency["max"]
    assert "p99" not in latency and [o["name"] for o in latency["omitted"]] == ["p90", "p95", "p99"]  # 7 calls: p50 only
    assert latency["std"] >= 0 and latency["throughput_per_s"] > 0 and latency["warmup"] == 10
    assert re.search(r"latency example: p50 [\d.e-]+ ms, mean [\d.e-]+ ± [\d.e-]+ ms \(min .*7 runs after 10 warm-up\)", proc.stderr)
    assert "p90 omitted (needs 10 runs), p95 omitted (needs 20 runs), p99 omitted (needs 100 runs)" in proc.stderr

    from safetensors.torch import load_file

    saved_in = load_file(str(ins / "example.inputs.safetensors"))
    saved_out = load_file(str(outs / "example.outputs.safetensors"))
    manifest = json.loads(run_cli("inspect", str(example_pkg.path), "--json").stdout)["manifest"]
    assert set(saved_in) == {i["name"] for i in manifest["io"]["inputs"] if i.get("tensor")}
    assert set(saved_out) == {o["name"] for o in manifest["io"]["outputs"]}
    replay = run_probe(str(example_pkg.path), "--fast", "--inputs", str(ins / "example.inputs.safetensors"), "-q")
    assert replay.returncode == 0, replay.stdout + replay.stderr  # the saved inputs replay as --inputs


@pytest.mark.parametrize("cli", ["runtime_probe", "aoti-guard"])
def test_torch_noise_in_the_child_goes_to_the_report_and_log_file(cli: str, static_pkg: Built, tmp_path: Path) -> None:
    """Issue 15: torch's warnings and log records go to the report and --log-file, never to the
    terminal. The probe's child emits both (injected at load); before, the child's captured stderr
    was dropped on success and --log-file held progress lines only."""
    from tests.hostile.faults import inject_env

    log = tmp_path / "probe.log"
    argv = [str(static_pkg.path), "--fast", "--log-file", str(log), "--json", "-"]
    proc = (
        run_probe(*argv, env=inject_env(tmp_path, "warn"))
        if cli == "runtime_probe"
        else run_cli("probe", *argv, env=inject_env(tmp_path, "warn"))
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    validate("probe-report", report)
    kept = report["extra"]["log"]
    assert any("FutureWarning: isinstance(treespec, LeafSpec)" in line for line in kept), kept
    assert any("an injected torch log record" in line for line in kept), kept
    assert "LeafSpec" not in proc.stderr and "injected torch log" not in proc.stderr
    text = log.read_text()
    assert "LeafSpec" in text and "an injected torch log record" in text and "[golden] passed" in text
