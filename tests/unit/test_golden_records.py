"""Issue 40 finding 13: the golden phase runs the package's own data through the package's own
contract, and bad golden data is a package finding (``golden.invalid``), never a run error that
starts the escalation ladder.

Three layers: the records against the golden file's header (parent, runtime_probe/golden/records.py),
the stored inputs through the guarded loader's checks and the file's bytes through its reader
(child, child/ops.py), and the golden phase that turns the child's refusals into findings.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.golden.records import file_findings
from runtime_probe.package.manifest import Manifest, parse_manifest

from .fakepkg import make_package
from .test_manifest import minimal


def _manifest(samples: list[dict[str, Any]], *, output_tensor: bool = True, dtype: str = "float32") -> Manifest:
    m = copy.deepcopy(minimal())
    m["io"]["inputs"][0]["tensor"]["dtype"] = dtype
    if output_tensor:
        m["io"]["outputs"] = [{"name": "output", "tensor": {**m["io"]["inputs"][0]["tensor"], "dtype": "float32"}}]
    m["golden"]["samples"] = samples
    return parse_manifest(json.dumps(m).encode())


def _golden(path: Path, **tensors: Any) -> str:
    import torch

    _safetensors.dump({"s0.in.x": torch.ones(4, 16), "s0.out.output": torch.ones(4, 16), **tensors}, str(path))
    return str(path)


SAMPLE = {"id": "example", "inputs": {"x": "s0.in.x"}, "outputs": {"output": "s0.out.output"}, "symbols": {"batch": 4}}


def test_a_golden_file_that_is_no_tensor_file_is_one_finding_and_nothing_runs(tmp_path: Path) -> None:
    so = tmp_path / "golden.safetensors"
    so.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)  # the .so, as a lying golden entry points at it
    findings, bad = file_findings(_manifest([SAMPLE]), str(so), "golden")
    assert bad is None
    assert [f.code for f in findings] == ["golden.invalid"]
    assert findings[0].message.startswith("no golden sample was run: the golden file g is not a tensor file")
    assert findings[0].evidence == {"entry": "g"}


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda s: s.update(inputs={}), "gives no stored value for input 'x'"),
        (lambda s: s.update(inputs={"x": "nope"}), "input 'x' is stored under 'nope', which the golden file does not hold"),
        (lambda s: s.update(outputs={}), "gives no reference for output 'output'"),
        (lambda s: s.update(outputs={"output": "gone"}), "reference for output 'output' is stored under 'gone'"),
    ],
)
def test_a_record_the_child_could_not_run_or_would_leave_unchecked_is_refused(tmp_path: Path, edit: Any, words: str) -> None:
    broken = copy.deepcopy(SAMPLE) | {"id": "max"}
    edit(broken)
    findings, bad = file_findings(_manifest([SAMPLE, broken]), _golden(tmp_path / "g.safetensors"), "golden")
    assert bad == {"max"}
    assert [f.code for f in findings] == ["golden.invalid"]
    assert words in findings[0].message and findings[0].evidence["sample"] == "max", findings[0].message


def test_sound_records_pass(tmp_path: Path) -> None:
    assert file_findings(_manifest([SAMPLE]), _golden(tmp_path / "g.safetensors"), "golden") == ([], set())


# --- the child: ops.op_run on a fake model, the package's manifest read back from a real zip ---


class _Model:
    def __init__(self) -> None:
        self.calls = 0
        self.loader = self

    def boxed_run(self, leaves: list[Any]) -> list[Any]:
        self.calls += 1
        return [leaves[0].clone()]


def _run(tmp_path: Path, golden: str, *, dtype: str = "float32", stored: bool = True) -> tuple[dict[str, Any], _Model]:
    from runtime_probe.child import ops

    def edit(m: dict[str, Any]) -> None:
        m["io"]["inputs"][0]["tensor"]["dtype"] = dtype

    package = make_package(tmp_path / "p.pt2", edit=edit)
    state, model = ops.State(), _Model()
    state.models["release"] = model
    reply = ops.op_run(
        state,
        "release",
        golden_path=golden,
        sample=dict(SAMPLE),
        inputs=[{"name": "x", "kind": "tensor", "value": None, "stride": [16, 1]}],
        in_spec="",
        outputs=["output"],
        device="cpu",
        tolerances={"output": [0.0, 0.0]},
        contract_from=str(package),
        stored=stored,
    )
    return reply, model


def test_stored_inputs_the_contract_refuses_never_reach_the_model(tmp_path: Path) -> None:
    reply, model = _run(tmp_path, _golden(tmp_path / "g.safetensors"), dtype="int64")
    assert model.calls == 0
    assert reply["contract_error"]["code"] == "input.dtype" and reply["contract_error"]["argument"] == "x", reply


def test_stored_inputs_that_fit_run_and_are_compared(tmp_path: Path) -> None:
    reply, model = _run(tmp_path, _golden(tmp_path / "g.safetensors"))
    assert model.calls == 1 and "contract_error" not in reply
    assert reply["outputs"]["output"]["passed"] is True


def test_bool_bytes_other_than_0_and_1_are_a_data_error_not_a_raise(tmp_path: Path) -> None:
    golden = _golden(tmp_path / "g.safetensors")
    blob = Path(golden).read_bytes()
    import struct

    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    header["flag"] = {"dtype": "BOOL", "shape": [2], "data_offsets": [len(data), len(data) + 2]}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    Path(golden).write_bytes(struct.pack("<Q", len(raw)) + raw + data + b"\x01\x02")
    reply, model = _run(tmp_path, golden)
    assert model.calls == 0
    assert "BOOL data holds bytes other than 0 and 1" in reply["data_error"], reply


# --- the phase: the child's refusals as findings, never a replay ---


class _Worker:
    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []

    def request(self, op: str, timeout: float, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(kwargs)
        return self.replies.pop(0)


def _phase(tmp_path: Path, replies: list[dict[str, Any]], **options: Any) -> tuple[list[Any], _Worker, Any]:
    from runtime_probe.probe.options import ProbeOptions
    from runtime_probe.probe.phases import Device, Shared, golden_phase

    two = [SAMPLE, copy.deepcopy(SAMPLE) | {"id": "max"}]
    shared = Shared(str(tmp_path / "m.pt2"), ProbeOptions(**options), str(tmp_path), manifest=_manifest(two))
    shared.archive = object()  # type: ignore[assignment]  # the phase only needs the archive phase to have run
    shared.golden_path = _golden(tmp_path / "g.safetensors")
    worker = _Worker(replies)
    dev = Device("cpu", None, worker=worker)  # type: ignore[arg-type]
    findings, _detail, _go_on = golden_phase(shared, dev)
    return findings, worker, dev


def test_a_refused_stored_input_is_golden_invalid_naming_sample_and_argument(tmp_path: Path) -> None:
    refusal = {
        "code": "input.dtype",
        "argument": "x",
        "message": "x: dtype is float32, expected int64",
        "expected": "int64",
        "found": "float32",
    }
    findings, worker, dev = _phase(tmp_path, [{"contract_error": refusal}, {"contract_error": refusal}])
    assert [f.code for f in findings] == ["golden.invalid", "golden.invalid"]
    assert findings[0].evidence == {"sample": "example", "entry": "g", "argument": "x"}
    assert "x: dtype is float32, expected int64" in findings[0].message and "inconsistent" in (findings[0].hint or "")
    assert dev.replay is None  # the model did not run: nothing to escalate
    assert all(r["stored"] is True and r["contract_from"] for r in worker.requests)


def test_golden_data_the_reader_refuses_is_one_finding_and_no_later_sample_runs(tmp_path: Path) -> None:
    findings, worker, dev = _phase(tmp_path, [{"data_error": "tensor 'flag': BOOL data holds bytes other than 0 and 1"}])
    assert [f.code for f in findings] == ["golden.invalid"]
    assert "BOOL data" in findings[0].message and findings[0].evidence == {"entry": "g"}
    assert len(worker.requests) == 1 and dev.replay is None


def test_an_inputs_file_the_reader_refuses_is_the_users_finding(tmp_path: Path) -> None:
    import torch

    inputs = tmp_path / "req.safetensors"
    _safetensors.dump({"x": torch.ones(4, 16)}, str(inputs))
    ok = {"outputs": {"output": {"passed": True, "nonfinite": 0}}}
    findings, worker, dev = _phase(
        tmp_path, [ok, ok, {"data_error": "tensor 'x': BOOL data holds bytes other than 0 and 1"}], inputs=str(inputs)
    )
    assert [f.code for f in findings] == ["input.count"], findings
    assert findings[0].message.startswith(f"--inputs {inputs} cannot be read") and dev.replay is None
    assert "stored" not in worker.requests[-1]


def test_shapes_takes_its_values_from_a_sample_whose_record_the_file_serves(tmp_path: Path) -> None:
    from runtime_probe.probe.options import ProbeOptions
    from runtime_probe.probe.phases import Device, Shared, golden_phase

    broken = copy.deepcopy(SAMPLE) | {"inputs": {"x": "gone"}}
    second = copy.deepcopy(SAMPLE) | {"id": "max"}
    shared = Shared(str(tmp_path / "m.pt2"), ProbeOptions(shapes="x:2x16"), str(tmp_path), manifest=_manifest([broken, second]))
    shared.archive = object()  # type: ignore[assignment]
    shared.golden_path = _golden(tmp_path / "g.safetensors")
    ok = {"outputs": {"output": {"passed": True, "nonfinite": 0}}}
    worker = _Worker([ok, ok])
    findings, _detail, _go_on = golden_phase(shared, Device("cpu", None, worker=worker))  # type: ignore[arg-type]
    assert [f.code for f in findings] == ["golden.invalid"] and findings[0].evidence["sample"] == "example"
    assert [r["sample"]["id"] for r in worker.requests] == ["max", "shapes"]
    assert worker.requests[-1]["sample"]["inputs"] == {"x": "s0.in.x"}
