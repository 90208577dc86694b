"""``runtime_probe.runtime.compiled_model.CompiledModel``: torch's ``AOTICompiledModel`` behaviour over the
same C++ loader, without importing Inductor in the loading process (a serving process's cold
start, the probe's child, the build's validation child: ~1 CPU-second each, docs/benchmarks.md)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.runtime import layout, torch_compat
from runtime_probe.runtime.compiled_model import CompiledModel

from . import models
from .conftest import Built

pytestmark = pytest.mark.integration


def _both(path: Path, model_name: str) -> tuple[CompiledModel, Any]:
    """Ours and torch's, each over a loader of its own for the same package."""
    ours = torch_compat.make_package_loader(str(path), model_name, None)
    loader = torch_compat.package_loader_class()(str(path), model_name, False, 1, -1)
    return ours, torch_compat.compiled_model_class()(loader)


def test_it_calls_reads_and_loads_constants_as_torchs_wrapper_does(mixed_pkg: Built, static_pkg: Built) -> None:
    import torch

    ours, theirs = _both(mixed_pkg.path, layout.RELEASE_MODEL)
    assert isinstance(ours, CompiledModel)
    torch.manual_seed(0)
    x, ids, scale = torch.randn(4, 8), torch.randint(0, 10, (4,)), torch.rand(8, dtype=torch.float16) + 0.5
    mine, torchs = ours(x, ids, scale=scale), theirs(x, ids, scale=scale)
    assert type(mine) is type(torchs) and len(mine) == len(torchs) == 2
    assert all(a.equal(b) for a, b in zip(mine, torchs))
    assert ours.get_metadata() == dict(theirs.get_metadata())
    assert ours.get_constant_fqns() == list(theirs.get_constant_fqns())

    ours, theirs = _both(static_pkg.path, layout.RELEASE_MODEL)
    fqns = ours.get_constant_fqns()
    assert fqns
    x = torch.randn(8, 16)
    before = ours(x)
    torch.manual_seed(1)
    model, _ = models.static()  # the package's model: its constants' shapes
    state = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    new = {fqn: state[fqn] for fqn in fqns}
    ours.load_constants(new, check_full_update=True)
    theirs.load_constants(new, check_full_update=True)
    after = ours(x)
    assert not after.equal(before) and after.equal(theirs(x))
    twin = copy.deepcopy(ours)  # shares the loaded model, as torch's copy does
    assert twin is not ours and twin.loader is ours.loader and twin(x).equal(after)
    # torch's keyword arguments reach the loader: user-managed constants are used in place
    held = {fqn: t * 2 for fqn, t in new.items()}
    ours.load_constants(held, check_full_update=True, user_managed=True)
    theirs.load_constants(held, check_full_update=True, user_managed=True)
    doubled = ours(x)
    assert not doubled.equal(after) and doubled.equal(theirs(x))


_LOAD_AND_LIST = """
import json, sys
import runtime_probe
model = runtime_probe.load(sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("torch._inductor"))))
"""


def test_loading_a_package_imports_no_inductor(static_pkg: Built) -> None:
    """torch's wrapper imported torch._inductor (through torch.export.pt2_archive._package) in
    every process that loaded a package: ~1 CPU-second of a serving process's ~2.4 s cold start."""
    proc = subprocess.run([sys.executable, "-c", _LOAD_AND_LIST, str(static_pkg.path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == []
