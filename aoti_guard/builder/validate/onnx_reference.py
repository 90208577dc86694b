"""A second reference for validation: the same ExportedProgram exported to ONNX and run by ONNX
Runtime (CPU) on every golden sample (``aoti-guard build --reference onnxruntime``).

The export and the runs happen in a child process (``aoti_guard.builder.validate.onnx_child``), started before the
compiled model runs so the two overlap; this process never imports onnx or onnxruntime. ONNX
inputs are matched to the contract's tensor inputs by position (the flattened order the contract
records), ONNX outputs to the contract's tensor outputs by position. A model that cannot be
exported, or a sample ONNX Runtime cannot run, is a warning: that sample has no second reference,
the build goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import keyword
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aoti_guard import _proc
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.resolve.saved_program import save_program
from aoti_guard.builder.twin.schedule import flat_program
from aoti_guard.builder.validate import verdict
from aoti_guard.builder.validate.references import sample_env
from aoti_guard.builder.validate.subject import Subject
from aoti_guard.builder.validate.tolerance import ToleranceRule
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import GoldenSample, IOContract
from runtime_probe.reporting.findings import Finding, warning

__all__ = [
    "REFERENCES",
    "OnnxReference",
    "PendingReference",
    "Reference",
    "exporter_summary",
    "finish_reference",
    "reference",
    "start_reference",
]

REFERENCES = ("onnxruntime",)
PHASE = "validate"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SUMMARY_LINE = re.compile(r"^<class '([\w.]+)'>: (.+)$")
_NONE_AT_ALL = "the build goes on without a second reference"
_NOT_THIS_SAMPLE = "the build goes on; this sample has no second reference, the others are still compared"


@dataclass(frozen=True)
class OnnxReference:
    """ONNX Runtime's outputs per sample id (contract output order; None where it has none)."""

    outputs: Mapping[str, list[Any]] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)


class PendingReference:
    """The reference child, started; ``finish_reference`` collects it, ``cancel`` kills it."""

    def __init__(self, running: _proc.Running, result_path: str, onnx_path: str, kept: bool, index: Sequence[GoldenSample]) -> None:
        self.running = running
        self.result_path = result_path
        self.onnx_path = onnx_path
        self.kept = kept
        self.index = list(index)
        self.done = False

    def cancel(self) -> None:
        if not self.done:
            self.done = True
            self.running.wait(0)


def exporter_summary(message: str) -> str:
    """The line of a torch.onnx export error that names the cause (its 'Exception summary')."""
    text = _ANSI.sub("", message)
    lines = [line.strip() for line in text.splitlines()]
    if "## Exception summary" in lines:
        for line in lines[lines.index("## Exception summary") + 1 :]:
            m = _SUMMARY_LINE.match(line)
            if m:
                return f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}"
    return next((line for line in lines if line), "no message")


def _tensor_keys(contract: IOContract, g: GoldenSample) -> list[str]:
    return [g.inputs[spec.name] for spec in contract.inputs if spec.kind == "tensor" and spec.tensor is not None and spec.name in g.inputs]


def onnx_program(ep: Any, contract: IOContract) -> Any:
    """The program the ONNX child exports: ``ep`` with a flat call structure (``twin.flat_program``),
    its leaves named after the contract's inputs, and no export guards.

    Flat, because the child is a fresh interpreter: a library type in the call structure (a Hugging
    Face ``ModelOutput``, a ``DynamicCache``) is registered with pytree only where the factory's
    library was imported, and ``torch.export.load`` cannot rebuild the program without it. The
    ONNX model has tensor inputs and outputs in flat order either way, which is how they are
    matched to the contract. No guards, because torch writes them against the user's argument
    names (``L['input_ids']``), which the flat copy does not have: the ONNX exporter's
    decomposition then fails with ``NameError: name 'L' is not defined``. ONNX Runtime checks no
    guard, and the golden samples already passed the eager model's.

    ``ep`` itself where this torch's program is not laid out as ``flat_program`` expects.
    """
    try:
        flat = flat_program(ep)
    except ValueError:
        return ep
    names = _leaf_names(contract, len(flat.module_call_graph[0].signature.forward_arg_names or ()))
    if names is not None:
        root, *rest = flat._module_call_graph
        flat._module_call_graph = [dataclasses.replace(root, signature=dataclasses.replace(root.signature, forward_arg_names=names)), *rest]
    flat._guards_code = []
    return flat


def _leaf_names(contract: IOContract, count: int) -> list[str] | None:
    """The contract's input names as Python names (``xs[1]`` -> ``xs_1``), one per leaf, so that
    the ONNX model's inputs read as the model's; None where they do not line up one to one."""
    if count == 0 or len(contract.inputs) != count:
        return None
    names: list[str] = []
    for spec in contract.inputs:
        base = re.sub(r"\W+", "_", spec.name).strip("_") or "input"
        if not base.isidentifier() or keyword.iskeyword(base):
            base = f"input_{base}"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
    return names


def start_reference(
    ep: Any, work: str, golden_path: str, index: Sequence[GoldenSample], contract: IOContract, keep_onnx: str | None
) -> PendingReference | OnnxReference:
    """Save the program and start the child; an OnnxReference (with a warning) if it cannot start."""
    out_dir = os.path.join(work, "onnx")
    os.makedirs(out_dir, exist_ok=True)
    # its own folder: the minifier saves the program as it is (work/program.pt2), this one is flat
    program, why = save_program(onnx_program(ep, contract), out_dir)
    if program is None:
        return OnnxReference(
            findings=(
                warning(
                    "build.onnx_export_failed",
                    PHASE,
                    f"the program cannot be handed to the ONNX exporter: {why}",
                    hint=_NONE_AT_ALL,
                ),
            )
        )
    onnx_path = os.path.abspath(keep_onnx) if keep_onnx else os.path.join(work, "model.onnx")
    result_path = os.path.join(out_dir, "result.json")
    request = {
        "program": program,
        "onnx_path": onnx_path,
        "golden": golden_path,
        "samples": [{"id": g.id, "inputs": _tensor_keys(contract, g)} for g in index],
        "out_dir": out_dir,
        "result": result_path,
    }
    request_path = os.path.join(out_dir, "request.json")
    with open(request_path, "w", encoding="utf-8") as fh:
        json.dump(request, fh)
    # cwd: a folder of our own, so ``-m`` cannot pick up another checkout from the user's cwd.
    running = _proc.start(
        _proc.python_argv("aoti_guard.builder.validate.onnx_child", request_path), log_path=os.path.join(out_dir, "child.log"), cwd=out_dir
    )
    return PendingReference(running, result_path, onnx_path, keep_onnx is not None, index)


def _read_result(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _model_failure(result: Mapping[str, Any], stage: str, how: str, tail: list[str]) -> Finding | None:
    """The warning when no sample can have an ONNX Runtime result (export or session failed, or
    the child ended before running any sample), else None."""
    failed = result.get("failed")
    if failed == "load":
        err = result.get("error") or {}
        return warning(
            "build.onnx_export_failed",
            PHASE,
            f"the ONNX child could not load the saved program: {err.get('type')}: {_first_line(str(err.get('message', '')))[:400]}",
            hint=f"{_NONE_AT_ALL}; this is aoti-guard's own step (the program it saved for the child), please report it",
            evidence={"error_type": err.get("type"), "message": str(err.get("message", ""))[-4000:], "log_tail": tail},
        )
    if failed == "export":
        err = result.get("error") or {}
        return warning(
            "build.onnx_export_failed",
            PHASE,
            f"the model could not be exported to ONNX: {exporter_summary(str(err.get('message', '')))[:500]}",
            hint=f"{_NONE_AT_ALL}; torch.onnx.export(..., custom_translation_table=...) can supply a missing op",
            evidence={"error_type": err.get("type"), "message": str(err.get("message", ""))[-4000:], "log_tail": tail},
        )
    if failed == "session":
        err = result.get("error") or {}
        return warning(
            "build.onnx_export_failed",
            PHASE,
            f"ONNX Runtime could not load the exported model: {err.get('type')}: {str(err.get('message', '')).strip()[:400]}",
            hint=f"{_NONE_AT_ALL}; keep the model with --keep-onnx to inspect it",
            evidence={"error_type": err.get("type"), "message": str(err.get("message", ""))[-4000:], "log_tail": tail},
        )
    if stage in ("start", "load", "export", "session"):
        return warning(
            "build.onnx_export_failed",
            PHASE,
            f"the ONNX export / ONNX Runtime child ended during {stage} ({how})",
            hint=f"{_NONE_AT_ALL}; see evidence.log_tail",
            evidence={"log_tail": tail},
        )
    return None


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no message")


def _sample_outputs(entry: Any, g: GoldenSample, contract: IOContract, n_tensor_outputs: int, how: str) -> list[Any] | Finding:
    """One sample's ONNX Runtime outputs in contract order, or the warning saying why it has none."""
    if not isinstance(entry, dict):
        reason = f"the child ended first ({how})" if how else "not run"
        return warning(
            "build.onnx_run_failed",
            PHASE,
            f"ONNX Runtime did not run golden sample {g.id} ({sample_env(g)}): {reason}",
            hint=_NOT_THIS_SAMPLE,
        )
    error_text = str(entry.get("error"))
    if entry.get("ok"):
        try:
            loaded = _safetensors.load(str(entry["path"]))
            it = iter([loaded[f"o{k}"] for k in range(n_tensor_outputs)])
            return [next(it) if o.tensor is not None else None for o in contract.outputs]
        except (OSError, ValueError, KeyError) as exc:
            error_text = f"its outputs cannot be read back: {type(exc).__name__}: {exc}"
    return warning(
        "build.onnx_run_failed",
        PHASE,
        f"ONNX Runtime could not run golden sample {g.id} ({sample_env(g)}): {error_text[:400]}",
        hint=_NOT_THIS_SAMPLE,
        evidence={"sample": g.id, "error": error_text},
    )


def finish_reference(pending: PendingReference, contract: IOContract, timeout: float) -> OnnxReference:
    """Wait for the child (at most ``timeout`` seconds) and read its outputs; with ``--keep-onnx``,
    a warning when no model was written there (the reason: the reference's own warning)."""
    ref = _finish(pending, contract, timeout)
    if pending.kept and not os.path.isfile(pending.onnx_path):
        why = ref.findings[0].message if ref.findings else "the exporter wrote no file"
        kept = warning(
            "build.onnx_not_kept",
            PHASE,
            f"--keep-onnx {pending.onnx_path}: no ONNX model was written there: {why}",
            hint="the package is unaffected; the reason above is why there is no ONNX model to keep",
        )
        return dataclasses.replace(ref, findings=(*ref.findings, kept))
    return ref


def _finish(pending: PendingReference, contract: IOContract, timeout: float) -> OnnxReference:
    pending.done = True
    proc = pending.running.wait(timeout)
    result = _read_result(pending.result_path)
    stage = str(result.get("stage", "start"))
    detail: dict[str, Any] = {
        "reference": "onnxruntime",
        "onnxruntime": result.get("onnxruntime"),
        "seconds": round(proc.seconds, 3),
        "export_seconds": result.get("export_seconds"),
        "onnx_inputs": [i.get("name") for i in result.get("inputs") or []],
        "onnx_outputs": result.get("outputs"),
    }
    if pending.kept and result.get("files"):
        detail["kept"] = result.get("files")
    tail = [line for line in proc.output.splitlines() if line.strip()][-30:]
    failure = _model_failure(result, stage, proc.how, tail)
    if failure is not None:
        return OnnxReference(findings=(failure,), detail=detail)
    n_tensor_outputs = sum(1 for o in contract.outputs if o.tensor is not None)
    onnx_outputs = list(result.get("outputs") or [])
    if len(onnx_outputs) != n_tensor_outputs:
        mismatch = warning(
            "build.onnx_export_failed",
            PHASE,
            f"the ONNX model has {len(onnx_outputs)} output(s), the contract {n_tensor_outputs} tensor output(s): they cannot be matched",
            hint=_NONE_AT_ALL,
            evidence={"onnx_outputs": onnx_outputs},
        )
        return OnnxReference(findings=(mismatch,), detail=detail)
    outputs: dict[str, list[Any]] = {}
    findings: list[Finding] = []
    samples = result.get("samples") or {}
    for g in pending.index:
        got = _sample_outputs(samples.get(g.id), g, contract, n_tensor_outputs, proc.how if stage != "done" else "")
        if isinstance(got, Finding):
            findings.append(got)
        else:
            outputs[g.id] = got
    detail["samples_run"] = len(outputs)
    return OnnxReference(outputs, tuple(findings), detail)


def progress_line(ref: OnnxReference) -> str:
    """The build's progress line about the reference: what ran, or why there is none."""
    d = ref.detail
    if not ref.outputs:
        # the one line a reader sees while the build runs: the real reason, not "see the warnings"
        why = ref.findings[0].message if ref.findings else "ONNX Runtime returned no outputs"
        return f"onnxruntime reference: OFF, the build has no second opinion: {why}"
    export = d.get("export_seconds")
    export_text = f"export {export:.1f}s, " if isinstance(export, float) else ""
    return f"onnxruntime reference: ONNX Runtime {d.get('onnxruntime')} ran {d.get('samples_run')} sample(s) ({export_text}child {d.get('seconds')}s)"


class Reference:
    """The reference of one validation run: started, then judged against the compiled outputs one
    sample at a time (``compare``), and summed up at the end (``finish``)."""

    def __init__(
        self,
        started: PendingReference | OnnxReference,
        contract: IOContract,
        options: BuildOptions,
        tolerance: ToleranceRule,
        note: Callable[[str], None],
    ) -> None:
        self.started = started
        self.contract = contract
        self.options = options
        self.tolerance = tolerance  # the build's: ONNX Runtime agrees with eager by the same rule as the package
        self.note = note
        self.results: list[verdict.ThreeWay] = []

    def _ready(self) -> OnnxReference:
        """ONNX Runtime's outputs, waiting for its child the first time they are needed."""
        if isinstance(self.started, PendingReference):
            self.started = finish_reference(self.started, self.contract, self.options.timeout_s)
            self.note(progress_line(self.started))
        return self.started

    def compare(self, sample: Any, compiled: Sequence[Any], refs64: Sequence[Any] | None, rows: Sequence[dict[str, Any]]) -> None:
        """Judge one sample three ways, adding ONNX Runtime's columns to its table ``rows``."""
        ref = self._ready()
        if ref.outputs:
            runs = verdict.SampleRuns(compiled, ref.outputs.get(sample.id), refs64)
            self.results += verdict.judge_sample(self.contract, sample, runs, rows, tolerance=self.tolerance)

    def finish(self) -> tuple[dict[str, Any], list[Finding]]:
        """The reference's detail and findings: its own warnings, and the verdicts over every sample."""
        ref = self._ready()
        findings = list(ref.findings)
        if ref.outputs:
            findings += verdict.verdict_findings(self.results, minify=self.options.minify)
        return dict(ref.detail), findings


@contextlib.contextmanager
def reference(subject: Subject, work: str, golden_path: str, index: Sequence[GoldenSample]) -> Iterator[Reference | None]:
    """The ONNX Runtime reference when ``options.reference`` asks for it (else None), its child
    started on entry and killed on exit if it is still running."""
    options, contract = subject.options, subject.contract
    if options.reference is None:
        yield None
        return
    subject.note(f"onnxruntime reference: exporting the program to ONNX, ONNX Runtime runs {len(index)} sample(s) in a child process")
    started = start_reference(subject.ep, work, golden_path, index, contract, options.keep_onnx)
    try:
        yield Reference(started, contract, options, subject.tolerance, subject.note)
    finally:
        if isinstance(started, PendingReference):
            started.cancel()
