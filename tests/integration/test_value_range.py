"""Issue 13 case 4 on CPU: the build records the valid values of an input that indexes a table,
and the probe's --inputs check names an id outside it before any native code runs."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from runtime_probe.formats import safetensors as _safetensors

from .conftest import Built
from .test_probe import codes, probe_json

pytestmark = pytest.mark.integration


def test_the_manifest_records_the_embedding_range(embed_pkg: Built) -> None:
    with zipfile.ZipFile(embed_pkg.path) as zf:
        root = zf.namelist()[0].split("/")[0]
        m = json.loads(zf.read(f"{root}/extra/aoti_guard/manifest.json"))
    assert m["io"]["inputs"][0]["name"] == "ids"
    assert m["io"]["inputs"][0]["tensor"]["value_range"] == [0, 999]


def test_an_out_of_vocabulary_id_is_named_before_the_call(embed_pkg: Built, tmp_path: Path) -> None:
    import torch

    ids = torch.randint(0, 1000, (4, 6))
    ids[2, 5] = 1_000_000_000
    inputs = tmp_path / "ids.safetensors"
    _safetensors.dump({"ids": ids}, str(inputs))
    proc, report = probe_json(embed_pkg.path, tmp_path, "--inputs", str(inputs))
    assert proc.returncode == 1
    oov = [f for p in report["phases"] for f in p["findings"] if f["code"] == "input.value_range"]
    assert len(oov) == 1 and oov[0]["message"] == "ids holds 1000000000 at [2, 5]; the table has 1000 rows"
    assert oov[0]["expected"] == "values in [0, 999]"
    golden = next(p for p in report["phases"] if p["name"] == "golden")
    assert [r["sample"] for r in golden["detail"]["runs"]] and "inputs" not in [r["sample"] for r in golden["detail"]["runs"]]
    assert not {"run.crash", "run.error"} & codes(report)


def test_ids_within_the_table_run(embed_pkg: Built, tmp_path: Path) -> None:
    import torch

    inputs = tmp_path / "ids.safetensors"
    _safetensors.dump({"ids": torch.randint(0, 1000, (4, 6))}, str(inputs))
    proc, report = probe_json(embed_pkg.path, tmp_path, "--inputs", str(inputs))
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "input.value_range" not in codes(report)


def test_the_guarded_loader_checks_the_recorded_range_by_default_on_cpu(embed_pkg: Built) -> None:
    """Issue 13 case 4, the loader half, through the public entry point on the package the build
    wrote: runtime_probe.load(...) raises input.value_range before the call, by default on CPU
    (issue 25: on main it was off unless asked, and an id past the table aborted the process);
    check_values=False is the opt-out, which reads no value."""
    import torch

    import runtime_probe
    from runtime_probe.reporting.errors import InputContractError

    ids = torch.randint(0, 1000, (4, 6))
    ids[2, 5] = 1_000_000_000
    for checked in (runtime_probe.load(embed_pkg.path), runtime_probe.load(embed_pkg.path, check_values=True)):
        assert (checked.value_mode, checked.check_values) == ("sync", True)
        with pytest.raises(InputContractError) as info:
            checked(ids)
        assert (info.value.code, info.value.argument) == ("input.value_range", "ids")
        assert str(info.value).startswith("ids holds 1000000000 at [2, 5]; the table has 1000 rows")
    good = ids.clone()
    good[2, 5] = 999
    unchecked = runtime_probe.load(embed_pkg.path, check_values=False)
    assert checked(good).equal(unchecked(good))
    assert (unchecked.value_mode, unchecked.check_values) == ("off", False)
    unchecked.check(ids)  # the opt-out: the out-of-range id is not looked at (and not called)
