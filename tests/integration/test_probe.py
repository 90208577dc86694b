"""The probe and the guarded loader on real packages: good ones pass, broken ones become findings."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.reporting.report import REPORT_SCHEMA_VERSION
from runtime_probe.runtime import layout

from .conftest import Built, run_cli, run_probe

pytestmark = pytest.mark.integration


def probe_json(
    pkg: Path, tmp_path: Path, *args: str, cli: str = "runtime_probe"
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    report = tmp_path / f"report-{len(list(tmp_path.iterdir()))}.json"
    if cli == "runtime_probe":
        proc = run_probe(str(pkg), "--json", str(report), *args)
    else:
        proc = run_cli("probe", str(pkg), "--json", str(report), *args)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    return proc, json.loads(report.read_text())


def codes(report: dict[str, Any]) -> set[str]:
    return {f["code"] for p in report["phases"] for f in p["findings"]}


def status(report: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["status"] for p in report["phases"]}


def rewrite(src: Path, dst: Path, edit: Any) -> Path:
    """Copy a package entry by entry, letting ``edit(name, data)`` change, drop or add entries."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            result = edit(info.filename, zin.read(info))
            for name, data in result if isinstance(result, list) else [(info.filename, result)] if result is not None else []:
                zout.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return dst


def test_good_package_passes_with_json_and_junit(example_pkg: Built, tmp_path: Path) -> None:
    junit = tmp_path / "probe.xml"
    proc, report = probe_json(example_pkg.path, tmp_path, "--junit", str(junit))
    assert proc.returncode == 0, proc.stdout
    assert report["schema_version"] == REPORT_SCHEMA_VERSION and report["passed"] and report["exit_code"] == 0
    assert report["package"]["sha256"] and report["host"]["torch"]
    assert list(status(report)) == ["archive", "host", "load", "constants", "golden", "escalate"]
    assert set(status(report).values()) == {"passed", "skipped"} and status(report)["escalate"] == "skipped"
    golden = next(p for p in report["phases"] if p["name"] == "golden")
    assert [r["sample"] for r in golden["detail"]["runs"]] == ["example", "min", "max", "mid"]
    assert all(isinstance(p["seconds"], float) for p in report["phases"])
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert [c.get("name") for c in cases] == ["archive", "host", "load", "constants", "golden", "escalate"]
    assert "PASSED" in proc.stdout


def test_fast_runs_one_golden_sample(example_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_json(example_pkg.path, tmp_path, "--fast")
    assert proc.returncode == 0
    golden = next(p for p in report["phases"] if p["name"] == "golden")
    assert [r["sample"] for r in golden["detail"]["runs"]] == ["example"]


def test_aoti_guard_probe_is_the_same_report(static_pkg: Built, tmp_path: Path) -> None:
    proc, report = probe_json(static_pkg.path, tmp_path, cli="aoti-guard")
    assert proc.returncode == 0 and report["kind"] == "probe"
    assert list(status(report)) == ["archive", "host", "load", "constants", "golden", "escalate"]


@pytest.mark.parametrize("cut", [0.5, 0.97])
def test_truncated_package(static_pkg: Built, tmp_path: Path, cut: float) -> None:
    data = static_pkg.path.read_bytes()
    bad = tmp_path / "truncated.pt2"
    bad.write_bytes(data[: int(len(data) * cut)])
    proc, report = probe_json(bad, tmp_path)
    assert proc.returncode == 1
    assert "archive.unreadable" in codes(report)
    assert status(report)["load"] == "skipped"


def test_flipped_byte_in_so_is_caught_before_loading(static_pkg: Built, tmp_path: Path) -> None:
    def flip(name: str, data: bytes) -> bytes:
        if name.endswith(".wrapper.so"):
            middle = len(data) // 2
            return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
        return data

    bad = rewrite(static_pkg.path, tmp_path / "flipped.pt2", flip)
    for cli in ("runtime_probe", "aoti-guard"):
        proc, report = probe_json(bad, tmp_path, cli=cli)
        assert proc.returncode == 1
        assert "archive.hash_mismatch" in codes(report)
        finding = next(f for p in report["phases"] for f in p["findings"] if f["code"] == "archive.hash_mismatch")
        assert finding["evidence"]["entry"].endswith(".wrapper.so")
        # nothing native was opened: no child, no load
        assert status(report)["host"] == "skipped" and status(report)["load"] == "skipped"


def test_dotdot_entry_is_unsafe(static_pkg: Built, tmp_path: Path) -> None:
    def add(name: str, data: bytes) -> list[tuple[str, bytes]]:
        out = [(name, data)]
        if name.endswith("archive_format"):
            out.append((name.split("/")[0] + "/../evil.so", b"\x7fELF"))
        return out

    bad = rewrite(static_pkg.path, tmp_path / "dotdot.pt2", add)
    proc, report = probe_json(bad, tmp_path)
    assert proc.returncode == 1 and "archive.unsafe_entry" in codes(report)
    assert status(report)["load"] == "skipped"


def test_manifest_schema_99(static_pkg: Built, tmp_path: Path) -> None:
    def bump(name: str, data: bytes) -> bytes:
        if name.endswith(layout.MANIFEST):
            m = json.loads(data)
            m["schema_version"] = "99.0"
            return json.dumps(m).encode()
        return data

    bad = rewrite(static_pkg.path, tmp_path / "schema99.pt2", bump)
    proc, report = probe_json(bad, tmp_path)
    assert proc.returncode == 1 and "manifest.unsupported_version" in codes(report)
    assert status(report)["load"] == "skipped"


def test_cpu_package_probed_with_cuda_on_a_host_without_cuda(static_pkg: Built, tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    proc, report = probe_json(static_pkg.path, tmp_path, "--device", "cuda")
    assert proc.returncode == 1
    assert {"env.device_unavailable", "env.device_mismatch"} <= codes(report)
    assert status(report)["load"] == "skipped"


def test_plain_package_is_probed_with_what_can_be_checked(plain_pkg: Path, tmp_path: Path) -> None:
    proc, report = probe_json(plain_pkg, tmp_path)
    assert "manifest.missing" in codes(report) and "golden.missing" in codes(report)
    assert status(report)["load"] == "passed"
    assert proc.returncode == 0  # warnings only


def _weights(static_pkg: Built, tmp_path: Path, edit: Any) -> Path:
    import torch
    from safetensors.torch import save_file

    sys.path.insert(0, str(Path(__file__).parent))
    import models

    sys.path.pop(0)
    model, _ = models.static()
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    edit(sd, torch)
    path = tmp_path / "weights.safetensors"
    save_file(sd, str(path))
    return path


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (lambda sd, torch: sd.__setitem__("lin.weight", torch.randn(16, 8)), "constants.shape_mismatch"),
        (lambda sd, torch: sd.pop("lin.weight"), "constants.missing"),
        (lambda sd, torch: sd.__setitem__("lin.extra", torch.randn(3)), "constants.unexpected"),
        (lambda sd, torch: sd.__setitem__("lin.weight", sd["lin.weight"].double()), "constants.dtype_mismatch"),
    ],
)
def test_bad_weights_are_rejected_before_load_constants(static_pkg: Built, tmp_path: Path, edit: Any, code: str) -> None:
    weights = _weights(static_pkg, tmp_path, edit)
    proc, report = probe_json(static_pkg.path, tmp_path, "--weights", str(weights))
    assert proc.returncode == 1
    assert code in codes(report)
    constants = next(p for p in report["phases"] if p["name"] == "constants")
    assert constants["status"] == "failed" and status(report)["golden"] == "skipped"
    assert not any(c.endswith(".crash") for c in codes(report))


def test_good_weights_are_loaded_and_checked(static_pkg: Built, tmp_path: Path) -> None:
    weights = _weights(static_pkg, tmp_path, lambda sd, torch: None)
    proc, report = probe_json(static_pkg.path, tmp_path, "--weights", str(weights))
    assert proc.returncode == 0, proc.stdout
    constants = next(p for p in report["phases"] if p["name"] == "constants")
    assert constants["detail"]["weights"]["same_as_build"] is True


def test_package_without_weights_fails_before_it_is_called(noweights_pkg: Built, tmp_path: Path) -> None:
    """Issue 13 case 1: its first call would read unset constants (SIGSEGV); the probe says so
    from the manifest and the loaded model, and never calls it."""
    proc, report = probe_json(noweights_pkg.path, tmp_path)
    assert proc.returncode == 1
    phases = {p["name"]: p for p in report["phases"]}
    missing = [f for f in phases["constants"]["findings"] if f["code"] == "constants.missing"]
    assert len(missing) == 1 and missing[0]["severity"] == "error" and "--weights" in missing[0]["hint"]
    assert phases["golden"]["status"] == "skipped" and "run.crash" not in codes(report)


def test_plain_package_without_weights_fails_before_it_is_called(plain_noweights_pkg: Path, tmp_path: Path) -> None:
    """The same package made by torch alone, without a manifest: known from the constant FQNs the
    loaded model reports, and either its .so's own load log (torch >= 2.14 builds print
    ``[AOTI_LOAD]`` lines: none for constants) or, before that, its wrapper.cpp
    (include_weights=false)."""
    proc, report = probe_json(plain_noweights_pkg, tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:]
    phases = {p["name"]: p for p in report["phases"]}
    missing = next(f for f in phases["constants"]["findings"] if f["code"] == "constants.missing")
    assert missing["severity"] == "error"
    if "aoti_load" in missing["evidence"]:  # the .so can log its load: its silence is the evidence
        assert "no [AOTI_LOAD] constant load" in missing["message"], missing["message"]
    else:
        assert "include_weights=false" in missing["message"], missing["message"]
    assert "lin.weight" in missing["evidence"]["constants"]
    assert phases["golden"]["status"] == "skipped"


def test_plain_package_with_its_weights_is_not_flagged(plain_pkg: Path, tmp_path: Path) -> None:
    proc, report = probe_json(plain_pkg, tmp_path)
    assert "constants.missing" not in codes(report), proc.stdout[-2000:]


def test_package_without_weights_passes_with_its_weights(noweights_pkg: Built, static_pkg: Built, tmp_path: Path) -> None:
    weights = _weights(static_pkg, tmp_path, lambda sd, torch: None)
    proc, _report = probe_json(noweights_pkg.path, tmp_path, "--weights", str(weights))
    assert proc.returncode == 0, proc.stdout


def test_import_runtime_probe_needs_the_standard_library_only() -> None:
    code = (
        "import sys, runtime_probe, runtime_probe.probe.run, runtime_probe.guard.load, runtime_probe.cli, runtime_probe.inspect, runtime_probe.trust.signature;"
        "heavy = [m for m in ('torch', 'click', 'onnx', 'onnxruntime', 'docker', 'numpy', 'aoti_guard', 'cryptography') if m in sys.modules];"
        "print(heavy)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_missing_package_is_usage_error(tmp_path: Path) -> None:
    proc = run_probe(str(tmp_path / "nope.pt2"))
    assert proc.returncode == 2 and "no such package" in proc.stderr and "Traceback" not in proc.stderr


def test_copy_keeps_passing(example_pkg: Built, tmp_path: Path) -> None:
    """A package renamed on disk (root folder != file name) still probes clean."""
    copy = tmp_path / "renamed.pt2"
    shutil.copy(example_pkg.path, copy)
    proc, _ = probe_json(copy, tmp_path, "--fast")
    assert proc.returncode == 0


def test_a_constant_the_compiler_renamed_is_paired_by_value_and_the_probe_passes(buffers_pkg: Built, tmp_path: Path) -> None:
    """The model's plain tensor attribute is ``offset`` to torch.export and ``_tensor_constant0`` to
    the compiled package. The manifest used to list only ``offset``: the probe refused a correct
    package with ``constants.unexpected '_tensor_constant0'``."""
    from .test_build import manifest_of

    m = manifest_of(buffers_pkg.path)
    offset = next(c for c in m.constants if c.fqn == "offset")
    assert (offset.runtime_fqn, offset.storage, offset.loaded_name) == ("_tensor_constant0", "package", "_tensor_constant0")
    assert buffers_pkg.report is not None
    validate = next(p for p in buffers_pkg.report["phases"] if p["name"] == "validate")
    assert validate["detail"]["constant_names"] == {"renamed": {"offset": "_tensor_constant0"}, "unpaired": [], "ambiguous": []}
    proc, report = probe_json(buffers_pkg.path, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert status(report)["constants"] == "passed" and status(report)["golden"] == "passed"
    assert "constants.unexpected" not in codes(report)


def test_weights_for_a_renamed_constant_go_by_the_name_the_package_lists(buffers_pkg: Built, tmp_path: Path) -> None:
    """A weights file holds what ``get_constant_fqns`` lists and ``load_constants`` takes: the
    package's name of a renamed constant; the program's name is refused as not a constant."""
    import torch
    from safetensors.torch import save_file

    sys.path.insert(0, str(Path(__file__).parent))
    import models

    sys.path.pop(0)
    model = models.buffers().model
    sd = {"lin.weight": model.lin.weight, "lin.bias": model.lin.bias, "running": model.running, "table": model.table}
    good = {**sd, "_tensor_constant0": model.offset}
    save_file({k: v.detach().clone().contiguous() for k, v in good.items()}, str(tmp_path / "good.safetensors"))
    proc, report = probe_json(buffers_pkg.path, tmp_path, "--weights", str(tmp_path / "good.safetensors"))
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert status(report)["constants"] == "passed"
    weights = next(p for p in report["phases"] if p["name"] == "constants")["detail"]["weights"]
    assert weights["tensors"] == 5 and weights["same_as_build"] is True  # the factory is seeded: the build's bytes
    by_program_name = {**sd, "offset": torch.zeros(12)}
    save_file({k: v.detach().clone().contiguous() for k, v in by_program_name.items()}, str(tmp_path / "bad.safetensors"))
    proc, report = probe_json(buffers_pkg.path, tmp_path, "--weights", str(tmp_path / "bad.safetensors"))
    assert proc.returncode == 1, proc.stdout[-2000:]
    refused = next(f for p in report["phases"] for f in p["findings"] if f["severity"] == "error")
    assert (refused["code"], refused["evidence"]["constant"]) == ("constants.unexpected", "offset")
    assert "'_tensor_constant0'" in refused["hint"]


def test_a_state_dict_file_is_taken_as_it_is(buffers_pkg: Built, tmp_path: Path) -> None:
    """Issue 43: a non-persistent buffer (``table``) and a lifted tensor constant (``offset``, the
    package's ``_tensor_constant0``) are in no ``state_dict()``: they keep the package's values,
    and the file of ``model.state_dict()`` passes as it is (it was refused: constants.missing)."""
    from safetensors.torch import save_file

    sys.path.insert(0, str(Path(__file__).parent))
    import models

    sys.path.pop(0)
    model = models.buffers().model
    assert set(model.state_dict()) == {"lin.weight", "lin.bias", "running"}
    save_file({k: v.detach().clone() for k, v in model.state_dict().items()}, str(tmp_path / "sd.safetensors"))
    proc, report = probe_json(buffers_pkg.path, tmp_path, "--weights", str(tmp_path / "sd.safetensors"))
    assert proc.returncode == 0, proc.stdout[-2000:]
    constants = next(p for p in report["phases"] if p["name"] == "constants")
    assert constants["detail"]["weights"]["same_as_build"] is True and status(report)["golden"] == "passed"
    (note,) = [f for f in constants["findings"] if f["code"] == "constants.from_package"]
    assert note["evidence"]["kept"] == ["_tensor_constant0", "table"]


def test_new_weights_say_under_the_verdict_that_nothing_was_compared(static_pkg: Built, tmp_path: Path) -> None:
    """Issue 43: the probe checks new weights for NaN/Inf only; a text report that read PASSED
    alone now says so under the verdict, with how to get references."""
    weights = _weights(static_pkg, tmp_path, lambda sd, torch: sd.__setitem__("lin.bias", sd["lin.bias"] + 0.5))
    proc = run_probe(str(static_pkg.path), "--weights", str(weights))
    assert proc.returncode == 0, proc.stdout[-2000:]
    lines = proc.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("PASSED"))
    assert lines[verdict + 1].startswith("  NOT CHECKED: the weights differ from the build's"), proc.stdout[-2000:]
    assert "aoti-guard references PKG TARGET --weights FILE" in lines[verdict + 2]
