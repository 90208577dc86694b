"""Issue 42, data-dependent checks: ``b = x.item(); torch._check(b < y.shape[0]); return y[:b]``.

On main the build generated a ``min`` sample that broke the model's own check, dropped it and
refused the package (``build.coverage_incomplete``: "u0: no sample gave it a value"); the bare
package refuses a bad call with torch's internal symbols (``Expected u0 < s17``). Now the samples
satisfy the check, the contract records it by argument name, and the guarded loader refuses a bad
call in the user's words before native code runs.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

import runtime_probe
from runtime_probe.reporting.errors import InputContractError
from runtime_probe.runtime.layout import MANIFEST

from .conftest import MODELS, Built, build_package

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def data_pkg(pkg_dir: Path) -> Built:
    built = build_package(pkg_dir, "data_check", f"{MODELS}:data_check", "--no-debug-twin")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return built


def _manifest(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        name = next(n for n in zf.namelist() if n.endswith("/" + MANIFEST))
        data: dict[str, Any] = json.loads(zf.read(name))
    return data


def test_a_valid_model_builds_with_samples_that_satisfy_its_check(data_pkg: Built) -> None:
    m = _manifest(data_pkg.path)
    checks = {c["expr"]: c["words"] for c in m["io"]["data_checks"]}
    assert checks["u0 < n"] == "x's value must be < y.shape[0]"
    assert [s["value_of"] for s in m["io"]["symbols"] if s["name"] == "u0"] == ["x"]
    samples = m["golden"]["samples"]
    assert len(samples) >= 4 and m["golden"]["dropped"] == []
    assert all(s["symbols"]["u0"] < s["symbols"]["n"] for s in samples), samples


def test_the_guarded_loader_serves_a_good_call_and_refuses_a_bad_one_by_name(data_pkg: Built) -> None:
    model = runtime_probe.load(data_pkg.path)
    y = torch.randn(3, 3)
    torch.testing.assert_close(model(torch.tensor(2), y), y[:2] * 2)
    with pytest.raises(InputContractError) as info:
        model(torch.tensor(4), y)
    assert info.value.code == "input.data_check"
    assert str(info.value).splitlines()[0] == "x's value must be < y.shape[0]: found x=4, y.shape[0]=3"
    # the bare package names torch's internal symbols for the same call
    with pytest.raises(Exception, match=r"u0 < s\d+"):
        model.compiled(torch.tensor(4), y)
