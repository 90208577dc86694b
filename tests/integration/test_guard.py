"""The guarded loader: every silent case of plain AOTI is refused with the argument's name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.reporting.errors import InputContractError, PackageRejected

from .conftest import Built

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def example_model(example_pkg: Built) -> Any:
    from runtime_probe import load

    return load(example_pkg.path)


@pytest.fixture(scope="module")
def mixed_model(mixed_pkg: Built) -> Any:
    from runtime_probe import load

    return load(mixed_pkg.path)


def _cases() -> dict[str, tuple[Any, str, str, str]]:
    import torch

    mask = torch.rand(4, 32) > 0.5
    return {
        # name: ((x, mask), code, argument, words in the message)
        "smaller static dim": ((torch.randn(4, 15), mask), "input.shape", "x", "dim 1 is 15, expected 16"),
        "larger static dim": ((torch.randn(4, 17), mask), "input.shape", "x", "dim 1 is 17, expected 16"),
        "dynamic dim above max": (
            (torch.randn(100, 16), torch.rand(100, 32) > 0.5),
            "input.range",
            "x",
            "x: dim 0 is 100, above the maximum 64 of 'batch'",
        ),
        "shared symbol differs": ((torch.randn(5, 16), mask), "input.range", "mask", "'batch' is 5"),
        "transposed": ((torch.randn(16, 4).t(), mask), "input.stride", "x", "contiguous"),
        "wrong dtype": ((torch.randn(4, 16, dtype=torch.float64), mask), "input.dtype", "x", "float64, expected float32"),
        "wrong dtype bool": ((torch.randn(4, 16), mask.float()), "input.dtype", "mask", "float32, expected bool"),
        "wrong device": ((torch.randn(4, 16, device="meta"), mask), "input.device", "x", "meta"),
        "wrong rank": ((torch.randn(4, 16, 1), mask), "input.shape", "x", "3 dimension(s)"),
        "not a tensor": (([[0.0] * 16] * 4, mask), "input.type", "x", "list"),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_guarded_loader_names_the_argument(example_model: Any, case: str) -> None:
    args, code, argument, words = _cases()[case]
    with pytest.raises(InputContractError) as info:
        example_model(*args)
    assert info.value.code == code
    assert info.value.argument == argument
    assert words in str(info.value)
    assert (info.value.expected is not None and info.value.found is not None) or code == "input.type"


def test_good_calls_by_position_and_keyword(example_model: Any) -> None:
    import torch

    from aoti_guard.builder.resolve.example import example_spec

    spec = example_spec()
    for b in (1, 7, 64):
        x, mask = torch.randn(b, 16), torch.rand(b, 32) > 0.5
        with torch.no_grad():
            ref = spec.model(x, mask)
        assert torch.allclose(example_model(x, mask), ref, atol=1e-5)
        assert torch.allclose(example_model(mask=mask, x=x), ref, atol=1e-5)


def test_positional_and_keyword_calls_fail_alike(example_model: Any) -> None:
    """All-positional calls take a shorter path (no binding by name); it must say the same."""
    import torch

    for x, mask in [(torch.randn(5, 16), torch.rand(4, 32) > 0.5), (torch.randn(4, 16), torch.rand(4, 32, dtype=torch.float64))]:
        with pytest.raises(InputContractError) as by_position:
            example_model(x, mask)
        with pytest.raises(InputContractError) as by_keyword:
            example_model(x=x, mask=mask)  # checked in the order given, as by position
        assert str(by_position.value) == str(by_keyword.value)
        assert by_position.value.hint == by_keyword.value.hint
    with pytest.raises(InputContractError) as info:
        example_model(torch.randn(5, 16), torch.rand(4, 32) > 0.5)
    assert "'batch' is 5 (from x.shape[0])" in str(info.value)
    assert info.value.hint == "mask.shape[0] and x.shape[0] must be equal"


def test_count_errors(example_model: Any) -> None:
    import torch

    x, mask = torch.randn(4, 16), torch.rand(4, 32) > 0.5
    with pytest.raises(InputContractError, match="mask: missing argument") as info:
        example_model(x)
    assert info.value.code == "input.count" and info.value.argument == "mask"
    with pytest.raises(InputContractError, match="too many positional"):
        example_model(x, mask, x)
    with pytest.raises(InputContractError, match="z: unexpected keyword") as info:
        example_model(x, mask, z=1)
    assert info.value.argument == "z"


def test_keyword_only_tensor_and_ints(mixed_model: Any) -> None:
    import torch

    x, ids, scale = torch.randn(4, 8), torch.randint(0, 10, (4,)), torch.rand(8, dtype=torch.float16)
    _out, doubled = mixed_model(x, ids, scale=scale)
    assert torch.equal(doubled, ids * 2)
    with pytest.raises(InputContractError) as info:
        mixed_model(x, ids.int(), scale=scale)
    assert (info.value.code, info.value.argument) == ("input.dtype", "ids")
    with pytest.raises(InputContractError) as info:
        mixed_model(torch.randn(1, 8), torch.randint(0, 10, (1,)), scale=scale)
    assert (info.value.code, info.value.argument) == ("input.range", "x")
    assert "below the minimum 2 of 'batch'" in str(info.value)
    with pytest.raises(InputContractError) as info:
        mixed_model(x, ids, scale=torch.rand(9, dtype=torch.float16))
    assert (info.value.code, info.value.argument) == ("input.shape", "scale")


def test_plain_aoti_runs_the_silent_cases(example_pkg: Built) -> None:
    """The cases above are silent in plain AOTI: it returns without any error (garbage or not)."""
    code = f"""
import torch
m = torch._inductor.aoti_load_package({str(example_pkg.path)!r})
mask = torch.rand(4, 32) > 0.5
silent = []
for name, args in {{
    "transposed": (torch.randn(16, 4).t(), mask),
    "above max": (torch.randn(100, 16), torch.rand(100, 32) > 0.5),
    "shared differs": (torch.randn(5, 16), mask),
}}.items():
    try:
        m(*args); silent.append(name)
    except Exception as exc:
        print("raised", name, exc)
print("SILENT", silent)
"""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={"AOTI_RUNTIME_CHECK_INPUTS": "0", **__import__("os").environ},
    )
    assert "SILENT" in proc.stdout, proc.stderr[-2000:]
    assert "transposed" in proc.stdout.split("SILENT", 1)[1]


def test_tampered_package_is_rejected_before_loading(example_pkg: Built, tmp_path: Path) -> None:
    import zipfile

    from runtime_probe import load

    bad = tmp_path / "tampered.pt2"
    with zipfile.ZipFile(example_pkg.path) as zin, zipfile.ZipFile(bad, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("golden.safetensors"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            zout.writestr(info, data)
    with pytest.raises(PackageRejected) as info:
        load(bad)
    assert any(getattr(f, "code", "") == "archive.hash_mismatch" for f in info.value.findings)


def test_plain_package_cannot_be_guarded(plain_pkg: Path) -> None:
    from runtime_probe import load

    with pytest.raises(PackageRejected, match="no aoti-guard manifest"):
        load(plain_pkg)


def test_plain_package_is_refused_before_its_entries_are_read(plain_pkg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_probe import load
    from runtime_probe.package import archive

    def read_all(*_: object, **__: object) -> None:
        raise AssertionError("the entries of a package without a manifest were read")

    monkeypatch.setattr(archive.Archive, "check_readable", read_all)
    with pytest.raises(PackageRejected, match="no aoti-guard manifest") as info:
        load(plain_pkg)
    assert {f.code for f in info.value.findings} == {"manifest.missing"}


def test_weights_are_checked_before_load_constants(example_pkg: Built) -> None:
    import torch

    from runtime_probe import load
    from runtime_probe.reporting.errors import ConstantsContractError

    example_model = load(example_pkg.path)  # its own instance: the swap below changes its weights

    good = {"proj.weight": torch.zeros(32, 16), "proj.bias": torch.zeros(32), "out.weight": torch.zeros(8, 32), "scale": torch.ones(32)}
    cases = [
        ({**good, "proj.weight": torch.zeros(16, 32)}, "constants.shape_mismatch", "proj.weight"),
        ({**good, "proj.bias": torch.zeros(32, dtype=torch.float64)}, "constants.dtype_mismatch", "proj.bias"),
        ({**good, "scale": torch.ones(32, device="meta")}, "constants.device_mismatch", "scale"),
        ({k: v for k, v in good.items() if k != "out.weight"}, "constants.missing", "out.weight"),
        ({**good, "nope": torch.zeros(1)}, "constants.unexpected", "nope"),
        ({**good, "out.bias": torch.zeros(8)}, "constants.unexpected", "out.bias"),  # inlined at build time
    ]
    for tensors, code, name in cases:
        with pytest.raises(ConstantsContractError) as info:
            example_model.load_constants(tensors)
        assert (info.value.code, info.value.constant) == (code, name)
    x, mask = torch.randn(2, 16), torch.ones(2, 32, dtype=torch.bool)
    before = example_model(x, mask)
    example_model.load_constants(good)
    after = example_model(x, mask)
    # zero weights: every row is the (inlined) output bias alone
    assert torch.equal(after[0], after[1]) and not torch.equal(before, after)


def test_a_size_outside_the_range_says_how_to_accept_it(mixed_model: Any) -> None:
    """The batch-above-maximum error (and below-minimum) carries a hint: the range the package
    accepts and the --dynamic flag that would build one accepting the size."""
    import torch

    scale = torch.rand(8, dtype=torch.float16) + 0.5
    with pytest.raises(InputContractError, match="above the maximum 32 of 'batch'") as info:
        mixed_model(torch.randn(40, 8), torch.randint(0, 10, (40,)), scale=scale)
    assert info.value.hint == (
        "the package accepts batch in 2..32; to accept 40, rebuild it with a wider range (--dynamic x:0=batch:2..40)"
    )
    with pytest.raises(InputContractError, match="below the minimum 2 of 'batch'") as info:
        mixed_model(torch.randn(1, 8), torch.randint(0, 10, (1,)), scale=scale)
    assert info.value.hint is not None and "(--dynamic x:0=batch:1..32)" in info.value.hint
