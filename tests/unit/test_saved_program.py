"""Issue 40, finding 3: a saved ExportedProgram is loaded without running anything it holds.

``torch.export.load`` runs a pickle planted in three places, ``eval``s the symbolic sizes, and
``module()`` runs the export guards and pastes the weights' names into its code: each such file
(tests/hostile/hostile_programs.py) is refused by ``load_program`` as ``UnsafeProgram`` and its
payload never runs; a real program still loads, runs and keeps its guards.
"""

from __future__ import annotations

import os
import pickle
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from aoti_guard.builder.resolve.saved_program import UnsafeProgram, check_guard, load_program, sympy_source_problem
from aoti_guard.builder.resolve.target import resolve_target
from runtime_probe.reporting.errors import UsageError
from tests.hostile.hostile_programs import PAYLOADS, make_program, plant


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_program(tmp_path_factory.mktemp("program") / "program.pt2")


def test_a_real_program_loads_and_runs(program: Path) -> None:
    ep = load_program(str(program))
    args, kwargs = ep.example_inputs
    assert ep.module()(*args, **kwargs).shape == (2, 3)
    assert os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD") is None, "the process's own torch.load is left as it was"


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_a_program_holding_code_is_refused_before_it_runs(program: Path, tmp_path: Path, payload: str) -> None:
    marker = tmp_path / "ran"
    hostile = plant(program, tmp_path / f"{payload}.pt2", payload, marker)
    with pytest.raises(UnsafeProgram) as caught:
        ep = load_program(str(hostile))
        args, kwargs = ep.example_inputs
        ep.module()(*args, **kwargs)  # where the guard and the names would run
    assert not marker.exists(), f"the payload ran: {PAYLOADS[payload][1]}"
    assert "holds pickled code or code in its expressions" in caught.value.message
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == 2


def test_the_payload_runs_with_plain_torch(program: Path, tmp_path: Path) -> None:
    """The test's own premise: the same file runs its payload when torch loads it."""
    marker = tmp_path / "ran"
    hostile = plant(program, tmp_path / "opaque.pt2", "opaque-constant", marker)
    torch.export.load(str(hostile))
    assert marker.exists()


def test_the_build_target_is_refused_as_a_usage_error(program: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hostile = plant(program, tmp_path / "model.pt2", "sample-inputs", marker)
    with pytest.raises(UnsafeProgram):
        resolve_target(str(hostile))
    assert not marker.exists()


def test_input_names_must_be_python_names(program: Path, tmp_path: Path) -> None:
    """module() writes ``def forward(self, NAME...)`` and ``{'KEY': NAME}`` from the file's names."""
    import json
    import zipfile

    hostile = tmp_path / "names.pt2"
    with zipfile.ZipFile(program) as zin, zipfile.ZipFile(hostile, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("models/model.json"):
                model = json.loads(data)
                model["graph_module"]["module_call_graph"][0]["signature"]["forward_arg_names"] = ["x=print('ran')"]
                data = json.dumps(model).encode()
            zout.writestr(info, data)
    with pytest.raises(UnsafeProgram, match="not a Python name"):
        load_program(str(hostile))


def test_pickles_outside_the_load_are_left_alone(program: Path) -> None:
    load_program(str(program))
    assert pickle.loads(pickle.dumps(OrderedDict(a=1))) == OrderedDict(a=1)  # a global, after the load


@pytest.mark.parametrize(
    "source",
    [
        "from sympy import *",
        "Symbol ('s77',positive =True ,integer =True )",
        "Add (Mod (Mul (Integer (Integer (2 )),Symbol ('s74',positive =True ,integer =True )),Integer (Integer (3 ))),Integer (1 ))",
        b"FloorDiv (s0 ,Integer (2 ))",
        "Max (Integer (1 ),Float ('0.5' ))<= oo",
    ],
)
def test_sympy_expressions_pass(source: object) -> None:
    assert sympy_source_problem(source) is None


@pytest.mark.parametrize(
    "source",
    [
        "__import__ ('os').system ('true')",
        "open ('x','w')",
        "Symbol ('x').__class__",
        "exec ('1')",
        "lambda :0",
        "Symbol ('a b')",
        "sympify ('1')",
        "S ('1')",
        "[Integer (1 )][0 ]",
    ],
)
def test_python_beyond_an_expression_is_refused(source: str) -> None:
    assert sympy_source_problem(source) is not None


@pytest.mark.parametrize(
    "guard",
    [
        "(2*L['x'].size()[0]) == L['y'].size()[0]",
        "1 + (L['x'].size()[0] // 2) <= 3*L['x'].size()[0]",
        "torch.sym_max(1, L['x'].size()[3] // 16) >= 1",
        "max(2, L['x'].size()[0]) <= 64",
        "math.isnan(L['f'])",
        "L['s'] == 'mean'",
    ],
)
def test_size_guards_pass(guard: str) -> None:
    assert check_guard(guard) is None


@pytest.mark.parametrize(
    "guard",
    [
        "__import__('os').system('true') == 0",
        "torch.save(L['x'], 'f') is None",
        "L['x'].__class__ == 1",
        "(lambda: 1)() == 1",
        "torch.hub.load('a', 'b') == 1",
        "L[print(1)] == 1",
        "open('f') == 1",
        "L['x'].size()[0] == 1 or 'L[' == 'y'",
    ],
)
def test_guards_that_are_code_are_refused(guard: str) -> None:
    assert check_guard(guard) is not None
