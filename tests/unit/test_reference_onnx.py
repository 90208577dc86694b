"""The parent side of the ONNX Runtime reference: reading what the child left, with stand-in children."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

from aoti_guard import _proc
from aoti_guard.builder.validate.onnx_reference import PendingReference, exporter_summary, finish_reference, progress_line
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import GoldenSample, InputSpec, IOContract, OutputSpec, TensorSpec

# The shape of torch 2.13's ConversionError text (ANSI colours included).
EXPORT_ERROR = """Failed to convert the exported program to an ONNX model. \x1b[96mThis is step 3/3\x1b[0m of exporting the model to ONNX. Next steps:
- If there is a missing ONNX function, implement it and register it to the registry.

## Exception summary

<class 'torch.onnx._internal.exporter._errors.DispatchError'>: No ONNX function found for <OpOverload(op='prims.bessel_i0', overload='default')>. Failure message: No decompositions registered for the real-valued input
⬆️
<class 'torch.onnx._internal.exporter._errors.ConversionError'>: Error when translating node %bessel_i0

(Refer to the full stack trace above for more information.)
"""

SPEC = TensorSpec("float32", (2, 3), (3, 1), True, "cpu")
CONTRACT = IOContract(
    params=(),
    inputs=(InputSpec("x", "x", "tensor", 0, SPEC), InputSpec("n", "n", "constant", None, None, 2)),
    outputs=(OutputSpec("output[0]", SPEC), OutputSpec("output[1]", None, 7), OutputSpec("output[2]", SPEC)),
    symbols=(),
)
INDEX = [GoldenSample(sid, {"x": f"s{i}.in.x"}, {}, {}) for i, sid in enumerate(("example", "min", "max"))]


def test_exporter_summary_names_the_missing_op() -> None:
    text = exporter_summary(EXPORT_ERROR)
    assert text.startswith("DispatchError: No ONNX function found for") and "prims.bessel_i0" in text
    assert "\x1b" not in text
    assert exporter_summary("RuntimeError somewhere\nmore") == "RuntimeError somewhere"


def _pending(tmp_path: Path, result: dict[str, Any] | None, code: str = "pass") -> PendingReference:
    result_path = tmp_path / "result.json"
    if result is not None:
        result_path.write_text(json.dumps(result))
    running = _proc.start([sys.executable, "-c", code], log_path=str(tmp_path / "child.log"))
    return PendingReference(running, str(result_path), str(tmp_path / "m.onnx"), False, INDEX)


def test_an_export_failure_is_one_warning(tmp_path: Path) -> None:
    result = {"stage": "export", "failed": "export", "error": {"type": "ConversionError", "message": EXPORT_ERROR}, "samples": {}}
    ref = finish_reference(_pending(tmp_path, result), CONTRACT, timeout=30)
    (f,) = ref.findings
    assert f.code == "build.onnx_export_failed" and f.severity.value == "warning"
    assert "could not be exported to ONNX" in f.message and "prims.bessel_i0" in f.message
    assert not ref.outputs


def test_a_child_that_dies_is_a_warning_with_the_signal(tmp_path: Path) -> None:
    ref = finish_reference(_pending(tmp_path, {"stage": "export", "samples": {}}, "import os; os.kill(os.getpid(), 9)"), CONTRACT, 30)
    (f,) = ref.findings
    assert f.code == "build.onnx_export_failed" and "SIGKILL" in f.message and "during export" in f.message


def test_a_hung_child_is_killed_at_the_timeout(tmp_path: Path) -> None:
    ref = finish_reference(_pending(tmp_path, None, "import time; time.sleep(60)"), CONTRACT, timeout=1)
    (f,) = ref.findings
    assert "timed out" in f.message


def test_outputs_map_by_position_and_failed_samples_are_warnings(tmp_path: Path) -> None:
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    out_path = tmp_path / "ort-0.safetensors"
    _safetensors.dump({"o0": a, "o1": b}, out_path)
    result = {
        "stage": "done",
        "onnxruntime": "1.31.1",
        "outputs": ["add", "mul"],
        "samples": {"example": {"ok": True, "path": str(out_path)}, "min": {"ok": False, "error": "ValueError: bad input"}},
    }
    ref = finish_reference(_pending(tmp_path, result), CONTRACT, 30)
    assert set(ref.outputs) == {"example"}
    got = ref.outputs["example"]
    assert got[1] is None and torch.equal(got[0], a) and torch.equal(got[2], b)  # the constant output keeps its slot
    messages = {f.message.split(":")[0]: f for f in ref.findings}
    assert {f.code for f in ref.findings} == {"build.onnx_run_failed"}
    assert any("sample min" in m and "bad input" in f.message for m, f in messages.items())
    assert any("sample max" in m for m in messages)  # never run
    assert ref.detail["samples_run"] == 1


def test_an_output_count_mismatch_gives_no_reference(tmp_path: Path) -> None:
    result = {"stage": "done", "outputs": ["only_one"], "samples": {}}
    ref = finish_reference(_pending(tmp_path, result), CONTRACT, 30)
    (f,) = ref.findings
    assert f.code == "build.onnx_export_failed" and "1 output(s), the contract 2" in f.message and not ref.outputs


def test_importing_aoti_guard_does_not_import_onnx() -> None:
    import subprocess

    code = (
        "import sys, aoti_guard, aoti_guard.cli, aoti_guard.builder.pipeline, aoti_guard.builder.validate.onnx_reference, aoti_guard.builder.minify.driver;"
        "print([m for m in ('onnx', 'onnxscript', 'onnxruntime') if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_model_onnx_runtime_cannot_load_is_one_warning(tmp_path: Path) -> None:
    result = {"stage": "session", "failed": "session", "error": {"type": "InvalidGraph", "message": "[ONNXRuntimeError] bad node"}}
    ref = finish_reference(_pending(tmp_path, result), CONTRACT, 30)
    (f,) = ref.findings
    assert f.code == "build.onnx_export_failed" and "could not load" in f.message and "bad node" in f.message


# What torch.export.load raised in the ONNX child for every transformers model before the child got
# a flat program (issue 44): the real cause, as load_program now words it.
LOAD_ERROR = (
    "torch.export.load could not read /w/onnx/program.pt2: NotImplementedError: Deserializing "
    "transformers.modeling_outputs.CausalLMOutputWithPast in pytree is not registered."
)


def test_a_program_the_child_cannot_load_says_the_real_cause_in_one_visible_line(tmp_path: Path) -> None:
    result = {"stage": "load", "failed": "load", "error": {"type": "RuntimeError", "message": LOAD_ERROR}, "samples": {}}
    ref = finish_reference(_pending(tmp_path, result), CONTRACT, 30)
    (f,) = ref.findings
    assert f.code == "build.onnx_export_failed" and "could not load the saved program" in f.message
    assert "CausalLMOutputWithPast in pytree is not registered" in f.message
    assert f.hint is not None and "custom_translation_table" not in f.hint  # not an exporter problem
    line = progress_line(ref)
    assert line.startswith("onnxruntime reference: OFF") and "CausalLMOutputWithPast in pytree is not registered" in line
    assert "\n" not in line and "see the warnings" not in line


def test_keep_onnx_that_wrote_nothing_is_a_warning_with_the_reason(tmp_path: Path) -> None:
    result = {"stage": "export", "failed": "export", "error": {"type": "ConversionError", "message": EXPORT_ERROR}, "samples": {}}
    pending = _pending(tmp_path, result)
    pending.kept = True
    ref = finish_reference(pending, CONTRACT, 30)
    export, kept = ref.findings
    assert export.code == "build.onnx_export_failed"
    assert kept.code == "build.onnx_not_kept" and kept.severity.value == "warning"
    assert f"--keep-onnx {tmp_path / 'm.onnx'}: no ONNX model was written there" in kept.message
    assert "prims.bessel_i0" in kept.message  # the reason, not just "nothing"


def test_keep_onnx_that_wrote_its_file_is_no_warning(tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(b"model")
    result = {"stage": "done", "outputs": ["only_one"], "samples": {}}
    pending = _pending(tmp_path, result)
    pending.kept = True
    ref = finish_reference(pending, CONTRACT, 30)
    assert {f.code for f in ref.findings} == {"build.onnx_export_failed"}  # the count mismatch alone
