"""``build --reference onnxruntime`` and ``build --minify`` on CPU, with real ONNX Runtime and the
real AOTI minifier: a model where all three agree, one with Inductor's testing-only relu bug
injected (AOTI alone is wrong; the minifier shrinks it), and one the ONNX exporter cannot take."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import HERE, MODELS, Built, build_package, run_cli

pytestmark = pytest.mark.integration


def findings(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [f for p in report["phases"] for f in p["findings"] if f["code"] == code]


def phase(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["phases"] if p["name"] == name)


@pytest.fixture(scope="module")
def agree(pkg_dir: Path) -> Built:
    """The bundled example (dynamic batch 1..64, a bool input) with the ONNX Runtime reference."""
    return build_package(
        pkg_dir, "agree", None, "--no-debug-twin", "--reference", "onnxruntime", "--keep-onnx", str(pkg_dir / "agree.onnx")
    )


@pytest.fixture(scope="module")
def relu_bug(pkg_dir: Path) -> Built:
    """Inductor's injected relu bug ("accuracy": relu(x) becomes x + 1 in the generated C++)."""
    return build_package(
        pkg_dir,
        "relu_bug",
        f"{MODELS}:relu_chain",
        "--no-debug-twin",
        "--reference",
        "onnxruntime",
        "--inductor-config",
        "cpp.inject_relu_bug_TESTING_ONLY=accuracy",
        "--minify",
        "--minify-timeout",
        "420",
    )


def test_all_three_agree_on_every_golden_sample(agree: Built, pkg_dir: Path) -> None:
    import onnx

    assert agree.returncode == 0, agree.stdout + agree.stderr
    report = agree.report
    assert report is not None
    (ok,) = findings(report, "build.references_agree")
    assert ok["severity"] == "info" and "4 sample(s)" in ok["message"]
    assert not findings(report, "build.onnx_run_failed") and not findings(report, "build.onnx_export_failed")
    validate = phase(report, "validate")
    rows = validate["detail"]["table"]
    # the boundary samples ran through ONNX Runtime too: the exported model kept the dynamic batch
    assert {r["sample"] for r in rows} == {"example", "min", "max", "mid"}
    for r in rows:
        assert r["reference_verdict"] == "agree"
        assert r["ort_vs_eager_max_abs"] < 1e-4 and r["aoti_vs_ort_max_abs"] < 1e-4
    ref = validate["detail"]["reference"]
    assert ref["samples_run"] == 4 and ref["onnx_inputs"] == ["x", "mask"]
    model = onnx.load(str(pkg_dir / "agree.onnx"))
    batch = [i.type.tensor_type.shape.dim[0] for i in model.graph.input]
    assert all(d.dim_param and not d.dim_value for d in batch), batch
    assert "[validate] onnxruntime reference:" in agree.stderr and "Traceback" not in agree.stderr
    assert agree.path.exists()


def test_injected_compiler_bug_is_blamed_on_the_compiler(relu_bug: Built) -> None:
    assert relu_bug.returncode == 1, relu_bug.stdout + relu_bug.stderr
    report = relu_bug.report
    assert report is not None
    (suspect,) = findings(report, "build.compiler_suspect")
    assert suspect["severity"] == "error" and "likely a compiler problem" in suspect["message"]
    assert "minify phase" in suspect["hint"]
    (row,) = phase(report, "validate")["detail"]["table"]
    assert row["reference_verdict"] == "compiler"
    assert row["max_abs"] >= 0.5  # AOTI vs eager
    assert row["ort_vs_eager_max_abs"] < 1e-5 and row["aoti_vs_ort_max_abs"] >= 0.5
    assert not relu_bug.path.exists() and relu_bug.path.with_suffix(".rejected.pt2").exists()


def test_the_minifier_shrinks_the_injected_bug(relu_bug: Built) -> None:
    report = relu_bug.report
    assert report is not None
    minify = phase(report, "minify")
    assert minify["status"] == "passed", minify
    (done,) = findings(report, "build.minified")
    ev = done["evidence"]
    assert ev["nodes_after"] < ev["nodes_before"], ev
    repro, launcher = Path(ev["repro"]), Path(ev["launcher"])
    assert repro.exists() and launcher.exists() and repro.parent == relu_bug.path.with_suffix(".minify")
    graph = [line for line in repro.read_text().splitlines() if line.startswith("#") and "torch.ops.aten" in line]
    assert any("aten.relu" in line for line in graph) and not any("aten.add" in line for line in graph), graph
    assert str(launcher) in ev["rerun_minifier"] and " minify" in ev["rerun_minifier"]
    assert f"minifier: repro {repro}" in relu_bug.stderr
    # the repro really reproduces: torch's own accuracy check fails on the minimal graph
    proc = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=600, cwd=repro.parent)
    assert proc.returncode != 0 and "AccuracyError" in proc.stderr, proc.stderr[-3000:]


def test_a_model_onnx_cannot_export_is_a_warning_not_a_failed_build(pkg_dir: Path) -> None:
    built = build_package(pkg_dir, "no_onnx", f"{MODELS}:no_onnx", "--no-debug-twin", "--reference", "onnxruntime")
    assert built.returncode == 0, built.stdout + built.stderr
    assert built.report is not None
    (f,) = findings(built.report, "build.onnx_export_failed")
    assert f["severity"] == "warning" and "prims.bessel_i0" in f["message"]
    assert built.path.exists() and "Traceback" not in built.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reference", "onnxruntime", "--keep-onnx", "/no/such/folder/m.onnx"], "folder /no/such/folder does not exist"),
        (["--keep-onnx", "m.onnx"], "--keep-onnx keeps the model of --reference onnxruntime"),
        (["--reference", "tensorrt"], "Invalid value for '--reference'"),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run_cli("build", "-o", str(tmp_path / "m.pt2"), *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())


def test_build_help_documents_the_flags() -> None:
    out = run_cli("build", "--help").stdout
    for flag in ("--reference", "--keep-onnx", "--minify", "--minify-timeout"):
        assert flag in out


def test_a_transformers_model_gets_its_onnx_reference(pkg_dir: Path) -> None:
    """Issue 44: the ONNX child is a fresh interpreter where transformers' ModelOutput is not
    registered; it loaded no transformers model's program, and the reference was silently off."""
    onnx_path = pkg_dir / "distilbert.onnx"
    built = build_package(
        pkg_dir,
        "hf_distilbert",
        f"{HERE / 'guard_models.py'}:distilbert",
        "--no-debug-twin",
        "--reference",
        "onnxruntime",
        "--keep-onnx",
        str(onnx_path),
    )
    assert built.returncode == 0, built.stdout + built.stderr
    report = built.report
    assert report is not None
    assert not findings(report, "build.onnx_export_failed") and not findings(report, "build.onnx_not_kept")
    (ok,) = findings(report, "build.references_agree")
    assert "4 sample(s)" in ok["message"], ok
    ref = phase(report, "validate")["detail"]["reference"]
    assert ref["samples_run"] == 4 and ref["onnx_inputs"] == ["input_ids", "attention_mask"], ref
    assert onnx_path.is_file() and onnx_path.stat().st_size > 0
    assert "onnxruntime reference: ONNX Runtime" in built.stderr and "ran 4 sample(s)" in built.stderr
