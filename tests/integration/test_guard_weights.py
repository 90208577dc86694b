"""The guarded loader's weights on real packages (issue 42): what torch's load_constants would copy
wrong is refused before it is called, and a package built without its weights refuses every call by
name until they are given (a file or a map), never a segfault. Each case that crashed runs in a
child: a SIGSEGV there fails the test instead of killing the test run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Built

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent


def _child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent), str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env)


_SLICE = """
import sys, torch, models
from runtime_probe import load
from runtime_probe.reporting.errors import ConstantsContractError
model, (x,) = models.static()
guarded = load(sys.argv[1])
big = torch.zeros(64, 16)
big[16:32] = model.lin.weight.detach()
for name, weight in (("offset", big[16:32]), ("larger", big[:16])):  # contiguous views of a 4 KB storage
    try:
        guarded.load_constants({"lin.weight": weight, "lin.bias": model.lin.bias.detach().clone()})
        print("ACCEPTED", name)
    except ConstantsContractError as exc:
        print("REFUSED", name, exc.code, exc.constant)
guarded.load_constants({"lin.weight": big[16:32].clone(), "lin.bias": model.lin.bias.detach().clone()})
torch.testing.assert_close(guarded(x), model(x))
print("OK")
"""


def test_a_slice_of_a_larger_tensor_is_refused_before_torch_copies_its_storage(static_pkg: Built) -> None:
    """torch copies the tensor's whole storage from its data pointer and applies the storage offset
    again: the guard let a contiguous slice through and the process died with SIGSEGV."""
    proc = _child(_SLICE, str(static_pkg.path))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.splitlines() == [
        "REFUSED offset constants.layout lin.weight",
        "REFUSED larger constants.layout lin.weight",
        "OK",
    ]


_WEIGHTLESS = """
import sys, torch, models
from runtime_probe import load
from runtime_probe.reporting.errors import ConstantsContractError
model, (x,) = models.static()
guarded = load(sys.argv[1])
for step in ("before", "partial"):
    try:
        guarded(x)
        print("CALLED", step)
    except ConstantsContractError as exc:
        print("REFUSED", step, exc.code, exc.constant)
    guarded.load_constants({"lin.weight": model.lin.weight.detach().clone()}, check_full_update=False)
guarded.load_constants(model.state_dict())
torch.testing.assert_close(guarded(x), model(x))
torch.testing.assert_close(load(sys.argv[1], weights=sys.argv[2])(x), model(x))
torch.testing.assert_close(load(sys.argv[1], weights=model.state_dict())(x), model(x))
try:
    load(sys.argv[1], weights={"lin.weight": model.lin.weight.detach().clone()})
except ConstantsContractError as exc:
    print("REFUSED load", exc.code, exc.constant)
print("OK")
"""


def test_a_package_without_weights_refuses_calls_until_it_has_them(noweights_pkg: Built, tmp_path: Path) -> None:
    """``aoti_load_package`` and ``runtime_probe.load`` alike used to run the first call on unset
    constants: SIGSEGV, exit 139. Now the call raises, naming the constants never set, until
    load_constants (or ``load(pkg, weights=...)``, a file or a map) has set all of them."""
    from safetensors.torch import save_file

    sys.path.insert(0, str(HERE))
    try:
        import models
    finally:
        sys.path.pop(0)
    weights = tmp_path / "state_dict.safetensors"
    save_file({k: v.detach().clone() for k, v in models.static()[0].state_dict().items()}, str(weights))
    proc = _child(_WEIGHTLESS, str(noweights_pkg.path), str(weights))
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.splitlines() == [
        "REFUSED before constants.missing lin.bias",
        "REFUSED partial constants.missing lin.bias",
        "REFUSED load constants.missing lin.bias",
        "OK",
    ]


def test_the_build_warns_that_the_package_carries_no_weights(noweights_pkg: Built, static_pkg: Built) -> None:
    assert noweights_pkg.report is not None and static_pkg.report is not None
    warned = [f for p in noweights_pkg.report["phases"] for f in p["findings"] if f["code"] == "build.no_packaged_weights"]
    assert len(warned) == 1 and warned[0]["severity"] == "warning"
    assert "2 constant(s) must be given at load" in warned[0]["message"] and "--weights" in warned[0]["hint"]
    assert "weights=" in warned[0]["hint"]
    assert not [f for p in static_pkg.report["phases"] for f in p["findings"] if f["code"] == "build.no_packaged_weights"]
