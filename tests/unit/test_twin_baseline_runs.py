"""The build's twin baseline (issue 26): on every golden sample after the example, the twin runs
for what it prints; its outputs stay in the child. gpt2 at full size: 3.3 GB of logits on its
largest sample, written out and read back for nothing, most of the twin's 10 s there (run 16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from aoti_guard.builder.validate import run as validate_run
from aoti_guard.builder.validate import twin_check
from aoti_guard.builder.validate.child_run import ChildRun
from runtime_probe.child.worker import ChildFailure
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import GoldenSample, IOContract, OutputSpec, TensorSpec

# what a level-2 twin printed on CUDA (run 15): an additive mask input holding -inf
PRINTED = (Path(__file__).parent / "data" / "printer" / "cuda_masked_nan_good.stdout").read_text()


class _Stream:
    def __init__(self) -> None:
        self.text = ""

    @property
    def total(self) -> int:
        return len(self.text)

    def since(self, mark: int) -> str:
        return self.text[mark:]


class _Worker:
    """Records each request; a ``run`` prints what a level-2 twin prints, or fails on ``fail_on``."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.stdout, self.stderr = _Stream(), _Stream()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.fail_on = fail_on

    def request(self, op: str, timeout: float, **args: Any) -> dict[str, Any]:
        self.requests.append((op, args))
        if args["sample"]["id"] == self.fail_on:
            raise ChildFailure("run", "", "the child died", 0.1, returncode=-11)
        self.stdout.text += PRINTED
        if "save_path" in args:  # what the child writes: the outputs, by name
            _safetensors.dump({"y": torch.full((2, 3), 7.0)}, args["save_path"], durable=args.get("save_durable", True))
        return {"seconds": 0.01}


def _run(worker: _Worker, out_dir: Path) -> ChildRun:
    index = [GoldenSample(i, {"x": f"{i}.x"}, {"y": f"{i}.y"}) for i in ("example", "min", "max", "mid")]
    y = OutputSpec("y", TensorSpec("float32", (2, 3), (3, 1), True, "cpu"))
    contract = IOContract(params=(), inputs=(), outputs=(y,), symbols=())
    return ChildRun(worker, "golden.safetensors", index, contract, "cpu", None, str(out_dir), 30.0)  # type: ignore[arg-type]


def test_the_twins_baseline_runs_keep_their_outputs_in_the_child(tmp_path: Path) -> None:
    worker = _Worker()
    seconds: dict[str, float] = {}
    runs = twin_check._twin_on_the_other_samples(_run(worker, tmp_path), seconds)
    assert list(runs) == ["min", "max", "mid"] and list(seconds) == ["min", "max", "mid"]
    assert all(op == "run" and args["key"] == "twin" for op, args in worker.requests)
    assert [args for _, args in worker.requests if "save_path" in args] == []  # nothing written out to be read back
    assert all(p[1].name == "arg7_1" and p[1].kinds == {"-inf"} for p in runs.values())  # what the baseline reads
    assert list(tmp_path.iterdir()) == []


def test_a_sample_the_twin_fails_on_ends_the_baseline_runs(tmp_path: Path) -> None:
    worker = _Worker(fail_on="max")
    runs = twin_check._twin_on_the_other_samples(_run(worker, tmp_path), {})
    assert list(runs) == ["min"]
    assert [args["sample"]["id"] for _, args in worker.requests] == ["min", "max"]


def test_ran_sample_returns_the_childs_failure(tmp_path: Path) -> None:
    worker = _Worker(fail_on="min")
    run = _run(worker, tmp_path)
    assert validate_run.ran_sample(run, "twin", run.index[0]) is None
    failure = validate_run.ran_sample(run, "twin", run.index[1])
    assert isinstance(failure, ChildFailure)


def test_a_samples_outputs_come_back_through_a_transient_file(tmp_path: Path) -> None:
    """The release model's outputs on a sample come back in a file written without fsync
    (gpt2 at full size: 3.3 GB of logits on its largest sample, run 16) and removed once read."""
    worker = _Worker()
    run = _run(worker, tmp_path)
    got = validate_run.compiled_sample(run, "release", run.index[2])
    assert isinstance(got, list) and torch.equal(got[0], torch.full((2, 3), 7.0))
    ((op, args),) = worker.requests
    assert op == "run"
    assert args["save_durable"] is False and args["save_path"].startswith(str(tmp_path))
    assert list(tmp_path.iterdir()) == []
