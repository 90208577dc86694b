"""builder/twin/schedule.py: where the debug twin compiles, the flat program a child can load without the
user's libraries, and the build's fallbacks when the child cannot be used."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils import _pytree as pytree

from aoti_guard.builder import pipeline
from aoti_guard.builder import twin_step as twin_step_mod
from aoti_guard.builder.compile import aoti as compile_mod
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.state import BuildState
from aoti_guard.builder.twin import schedule as twin
from aoti_guard.pt2 import writer


@dataclasses.dataclass
class EncoderOut:  # registered below under a module name no child can import, as a ModelOutput is
    hidden: torch.Tensor
    pooled: torch.Tensor


EncoderOut.__module__ = "not_installed_library.outputs"
pytree.register_dataclass(EncoderOut, serialized_type_name="not_installed_library.outputs.EncoderOut")


class _Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor) -> EncoderOut:
        h = self.lin(x) * mask.unsqueeze(-1)
        return EncoderOut(hidden=h, pooled=h.mean(dim=1))


@pytest.fixture(scope="module")
def program() -> Any:
    torch.manual_seed(0)
    x, mask = torch.randn(2, 3, 4), torch.ones(2, 3)
    batch = torch.export.Dim("batch", min=1, max=8)
    return torch.export.export(_Encoder().eval(), (x,), {"mask": mask}, dynamic_shapes={"x": {0: batch}, "mask": {0: batch}})


def test_schedule_puts_the_twin_in_a_child_on_cpu_and_cuda() -> None:
    """On CUDA the twin compiled after the release model until the GPU A/B (docs/zoo.md, "The
    twin's schedule on the GPU": build / bare 1.28 in a child against 1.40 after)."""
    assert twin.schedule() == "concurrent"  # auto, whatever the device
    assert twin.schedule("auto") == "concurrent"
    assert twin.schedule("after") == "after"  # --twin-schedule wins
    assert twin.schedule("concurrent") == "concurrent"


def test_an_unknown_twin_schedule_is_a_usage_error(tmp_path: Path) -> None:
    from runtime_probe.reporting.errors import UsageError

    with pytest.raises(UsageError, match="unknown twin schedule") as raised:
        pipeline.check_options(BuildOptions(output=str(tmp_path / "m.pt2"), twin_schedule="sometimes"))
    assert raised.value.hint is not None and "concurrent" in raised.value.hint


def test_flat_program_runs_the_same_graph_on_the_flat_leaves(program: Any) -> None:
    flat = twin.flat_program(program)
    args, kwargs = program.example_inputs
    leaves = pytree.tree_leaves((args, kwargs))
    assert [a for a in flat.example_inputs[0]] == leaves and flat.example_inputs[1] == {}
    got = flat.module(check_guards=False)(*leaves)
    want = program.module(check_guards=False)(*args, **kwargs)
    assert isinstance(got, tuple) and len(got) == 2
    assert torch.equal(got[0], want.hidden) and torch.equal(got[1], want.pooled)
    # the original is untouched: its own call structure, its symbol ranges shared
    assert "EncoderOut" in str(program.call_spec.out_spec)
    assert flat.range_constraints == program.range_constraints


_LOAD_IN_A_CHILD = """
import sys, torch
ep = torch.export.load(sys.argv[1])
args, kwargs = ep.example_inputs
out = ep.module(check_guards=False)(*args, **kwargs)
print("ran", type(out).__name__, len(out))
"""


def test_a_child_without_the_library_loads_the_flat_program_but_not_the_original(program: Any, tmp_path: Path) -> None:
    """The case of a Hugging Face ModelOutput or a DynamicCache that the user's factory registered."""
    original, flat = tmp_path / "original.pt2", tmp_path / "flat.pt2"
    torch.export.save(program, original)
    torch.export.save(twin.flat_program(program), flat)

    def child(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", _LOAD_IN_A_CHILD, str(path)], capture_output=True, text=True, timeout=300)

    refused = child(original)
    assert refused.returncode != 0 and "not_installed_library" in refused.stderr
    loaded = child(flat)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert "ran tuple 2" in loaded.stdout


def test_the_child_restores_the_hints_of_derived_dims_that_load_drops(tmp_path: Path) -> None:
    """torch.export.load keeps the hint of 8*s as an expression; Inductor needs s itself."""
    from aoti_guard.builder.twin.child import restore_hints

    class Scores(torch.nn.Module):  # the size 8*k appears, k alone never does
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return (x * 2 + y).softmax(-1)

    k = torch.export.Dim("k", min=1, max=16)
    x, y = torch.randn(2, 24), torch.randn(2, 24)
    ep = torch.export.export(Scores(), (x, y), dynamic_shapes={"x": {1: 8 * k}, "y": {1: 8 * k}})
    torch.export.save(twin.flat_program(ep), tmp_path / "p.pt2")
    loaded = torch.export.load(tmp_path / "p.pt2")
    restored = restore_hints(loaded)
    assert len(restored) == 1 and restored[0].endswith("=3"), restored  # 24 = 8 * 3
    assert restore_hints(loaded) == []  # nothing left to restore


def test_configs_a_child_cannot_take_are_said_and_nothing_starts(program: Any, tmp_path: Path) -> None:
    child, why = twin.start_child(program, {"some.option": lambda: 0}, str(tmp_path), str(tmp_path / "t.pt2"), "debug_twin")
    assert child is None and why is not None and "cannot be handed to a child" in why


# --- the twin step's choices, with the compile itself replaced --------------------------------------


class _FakeChild:
    def __init__(self, result: twin.TwinResult) -> None:
        self.result = result
        self.waited = False

    def wait(self, timeout: float) -> twin.TwinResult:
        self.waited = True
        return self.result

    def kill(self) -> None:  # pragma: no cover - not reached in these tests
        raise AssertionError("the step waits, it does not kill")


def _state(tmp_path: Path, child: Any) -> BuildState:
    notes: list[str] = []
    st = BuildState(None, BuildOptions(output=str(tmp_path / "m.pt2")), str(tmp_path), None, str(tmp_path / "m.pt2"), None, notes.append)  # type: ignore[arg-type]
    st.twin_child = child
    st.ep = object()
    return st


@pytest.fixture
def compiled_here(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(compile_mod, "compile_files", lambda ep, configs: calls.append(dict(configs)) or ["files"])
    monkeypatch.setattr(writer, "package_release", lambda path, files, model_name="model": Path(path).write_bytes(b"twin"))
    return calls


@pytest.mark.parametrize("stage", ["load", "compile"])
def test_a_child_that_could_not_load_or_compile_the_saved_program_falls_back_to_compiling_here(
    tmp_path: Path, compiled_here: list[dict[str, Any]], stage: str
) -> None:
    child = _FakeChild(twin.TwinResult(False, 3.0, stage, ("NotImplementedError: a type is not registered",)))
    st = _state(tmp_path, child)
    findings, detail = twin_step_mod.twin_step(st)
    assert child.waited and [f.code for f in findings] == ["build.twin_compiled_after"]  # said, not silently slower (issue 43)
    assert f"could not {stage} the saved program" in findings[0].message and findings[0].severity.value == "info"
    assert len(compiled_here) == 1 and compiled_here[0]["aot_inductor.debug_intermediate_value_printer"] == "2"  # the twin's configs
    assert detail is not None and "not registered" in detail["not_in_child"] and stage in detail["not_in_child"]
    assert st.twin_pt2 is not None and Path(st.twin_pt2).exists()


@pytest.mark.parametrize("stage", ["crash", "timeout"])
def test_a_twin_that_failed_in_its_child_warns_and_is_not_compiled_again(
    tmp_path: Path, compiled_here: list[dict[str, Any]], stage: str
) -> None:
    child = _FakeChild(twin.TwinResult(False, 9.0, stage, ("CppCompileError: boom",), "a hint"))
    st = _state(tmp_path, child)
    findings, _ = twin_step_mod.twin_step(st)
    assert compiled_here == []  # a crash or a timeout would only repeat
    assert [f.code for f in findings] == ["build.twin_failed"]
    assert findings[0].severity.value == "warning" and "boom" in findings[0].message and findings[0].hint == "a hint"
    assert findings[0].evidence["stage"] == stage
    assert st.twin_pt2 is None


def test_a_twin_that_compiled_in_its_child_is_used(tmp_path: Path, compiled_here: list[dict[str, Any]]) -> None:
    st = _state(tmp_path, _FakeChild(twin.TwinResult(True, 12.5)))
    findings, detail = twin_step_mod.twin_step(st)
    assert findings == [] and compiled_here == []
    assert detail == {"where": "a child process, beside the release compile", "child_s": 12.5}
    assert st.twin_pt2 == str(tmp_path / "twin" / "m.pt2")


@pytest.mark.parametrize(
    ("requested", "device", "weights"),
    [
        ("auto", "cpu", "release"),
        ("auto", "cuda", "release"),  # shared on CUDA too since issue 26 (tests/gpu/test_gpu_twin_weights.py)
        ("auto", "cuda:1", "release"),
        ("shared", "cuda", "release"),
        ("own", "cpu", "own"),
    ],
)
def test_where_the_twins_weights_are(requested: str, device: str, weights: str) -> None:
    assert twin.weights(requested, device) == weights


def test_a_twin_without_weights_is_compiled_without_constants_in_its_so() -> None:
    release = compile_mod.release_configs({"aot_inductor.package_constants_in_so": True}, {}, min_below_two=False)
    own = compile_mod.twin_configs(release)
    shared = compile_mod.twin_configs(release, own_weights=False)
    assert compile_mod.SHARED_WEIGHTS_CONFIG not in own  # the user's setting is not inherited either way
    assert shared[compile_mod.SHARED_WEIGHTS_CONFIG] is False
    assert {k: v for k, v in shared.items() if k != compile_mod.SHARED_WEIGHTS_CONFIG} == own
    assert compile_mod.has_config(compile_mod.SHARED_WEIGHTS_CONFIG)  # this torch has the lever


def test_an_unknown_twin_weights_value_is_a_usage_error(tmp_path: Path) -> None:
    from runtime_probe.reporting.errors import UsageError

    with pytest.raises(UsageError, match="unknown twin weights"):
        pipeline.check_options(BuildOptions(output=str(tmp_path / "m.pt2"), twin_weights="both"))


@pytest.mark.parametrize(("env", "niceness"), [(None, 19), ("0", 0), ("5", 5), ("19", 19), ("-3", 19), ("40", 19), ("low", 19)])
def test_the_twin_child_runs_below_the_release_compile(env: str | None, niceness: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """19 by default (the GPU A/B, docs/zoo.md); AOTI_GUARD_TWIN_NICE overrides it, within 0..19."""
    if env is None:
        monkeypatch.delenv(twin.NICE_ENV, raising=False)
    else:
        monkeypatch.setenv(twin.NICE_ENV, env)
    assert twin.child_niceness() == niceness


def test_the_twin_child_takes_its_niceness(program: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child lowers its own priority before it compiles (its compile workers inherit it)."""
    import pickle

    from aoti_guard.builder.twin import child as twin_child

    seen: list[int] = []
    monkeypatch.setattr(twin_child.os, "nice", lambda n: seen.append(n) or n)
    request = tmp_path / "req.pkl"
    request.write_bytes(
        pickle.dumps({"program": str(tmp_path / "missing.pt2"), "configs": pickle.dumps({}), "out": "x", "model_name": "m", "nice": 7})
    )
    twin_child.main([str(request), str(tmp_path / "result.json")])  # the load fails: reported, after the nice
    assert seen == [7]
    assert '"stage": "load"' in (tmp_path / "result.json").read_text()
