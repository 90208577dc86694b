"""The child side of the ONNX Runtime reference: ``python -m aoti_guard.builder.validate.onnx_child REQUEST.json``.

The only module that imports onnx, onnxscript and onnxruntime. It runs in a child process (see
reference_onnx.py): it loads the saved ExportedProgram, exports it with the dynamo ONNX exporter
(the program's dynamic dimensions stay symbolic), runs ONNX Runtime (CPU) on every golden sample
and saves the outputs as safetensors. Progress goes to a JSON result file, rewritten after each
step, so the parent knows how far it got even when this process dies.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from runtime_probe.reporting.report import write_atomic


def _write(path: str, result: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(result).encode())  # the parent never reads half a result


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[-12000:], "traceback": traceback.format_exc()[-6000:]}


def _load(program_path: str) -> Any:
    from aoti_guard.builder.resolve.saved_program import load_program

    return load_program(program_path)


def _export(ep: Any, onnx_path: str) -> list[str]:
    """Export the loaded program to ``onnx_path``; returns the files written (model + external data)."""
    import torch

    # For an ExportedProgram, args/kwargs/dynamic_shapes are ignored: the program's own symbolic
    # shapes are kept, so the boundary samples can run. dynamo=True is the default from torch 2.9
    # on (we support 2.11+); said anyway, so an older default cannot pick the TorchScript exporter.
    program = torch.onnx.export(ep, (), dynamo=True, verbose=False)
    if program is None:
        raise RuntimeError("torch.onnx.export returned no ONNXProgram")
    before = set(os.listdir(os.path.dirname(onnx_path) or "."))
    program.save(onnx_path)
    after = set(os.listdir(os.path.dirname(onnx_path) or "."))
    extra = sorted(os.path.join(os.path.dirname(onnx_path), n) for n in after - before if n != os.path.basename(onnx_path))
    return [onnx_path, *extra]


def main(argv: list[str]) -> int:
    """Load, export, open a session and run every sample, recording each stage as it starts: a
    stage that fails is recorded as data (``failed``, ``error``) and the child exits 0."""
    with open(argv[1], encoding="utf-8") as fh:
        request = json.load(fh)
    result_path = request["result"]
    result: dict[str, Any] = {"stage": "load", "samples": {}}
    _write(result_path, result)
    started = time.monotonic()
    try:
        ep = _load(request["program"])
    except Exception as exc:  # noqa: BLE001 - told apart from an export failure: its hint differs
        result.update(failed="load", error=_error(exc))
        _write(result_path, result)
        return 0
    result["stage"] = "export"
    _write(result_path, result)
    try:
        result["files"] = _export(ep, request["onnx_path"])
    except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent as data
        result.update(failed="export", error=_error(exc))
        _write(result_path, result)
        return 0
    result["export_seconds"] = time.monotonic() - started
    result["stage"] = "session"
    _write(result_path, result)
    session = _session(request["onnx_path"], result)
    _write(result_path, result)
    if session is None:
        return 0
    for sample in request["samples"]:
        result["samples"][sample["id"]] = _run_sample(session, sample, request, len(result["samples"]))
        _write(result_path, result)
    result["stage"] = "done"
    _write(result_path, result)
    return 0


def _session(onnx_path: str, result: dict[str, Any]) -> Any:
    """ONNX Runtime's CPU session on the exported model, its inputs and outputs recorded in
    ``result`` (stage ``run`` next); None when it cannot be opened (``failed``: session)."""
    started = time.monotonic()
    try:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only
        session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        result.update(failed="session", error=_error(exc))
        return None
    result["onnxruntime"] = ort.__version__
    result["inputs"] = [
        {"name": i.name, "type": i.type, "shape": [d if isinstance(d, (int, str)) else None for d in i.shape]} for i in session.get_inputs()
    ]
    result["outputs"] = [o.name for o in session.get_outputs()]
    result["session_seconds"] = time.monotonic() - started
    result["stage"] = "run"
    return session


def _run_sample(session: Any, sample: dict[str, Any], request: dict[str, Any], index: int) -> dict[str, Any]:
    """One golden sample through the session, its outputs saved as ``ort-INDEX.safetensors``."""
    import numpy as np
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    names = [i.name for i in session.get_inputs()]
    keys = sample["inputs"]
    started = time.monotonic()
    if len(keys) != len(names):
        return {
            "ok": False,
            "error": f"the ONNX model takes {len(names)} input(s) ({', '.join(names)}), the sample has {len(keys)} tensor input(s)",
        }
    try:
        tensors = _safetensors.load(request["golden"], names=keys)
        feed = {name: np.ascontiguousarray(tensors[key].numpy()) for name, key in zip(names, keys)}
        outs = session.run(None, feed)
        save = os.path.join(request["out_dir"], f"ort-{index}.safetensors")
        _safetensors.dump({f"o{k}": torch.from_numpy(np.ascontiguousarray(o)) for k, o in enumerate(outs)}, save)
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip()[:2000]}"}
    return {"ok": True, "path": save, "seconds": time.monotonic() - started}


if __name__ == "__main__":
    sys.exit(main(sys.argv))
