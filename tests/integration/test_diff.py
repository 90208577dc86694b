"""``aoti-guard diff`` on two real builds of one model that differ in a dynamic range (--dynamic
batch 2..32 vs 2..64) and in the build's tolerance (--atol): the diff names those and nothing
else, exit 1; a package against itself agrees, exit 0; a usage error exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.schemas import validate

from .conftest import MODELS, Built, build_package, run_cli


@pytest.fixture(scope="module")
def wider_pkg(pkg_dir: Path) -> Built:
    """mixed_pkg's model with batch up to 64 (not 32) and --atol 0.01 (not by dtype)."""
    built = build_package(
        pkg_dir,
        "mixed-wider",
        f"{MODELS}:mixed",
        "--no-debug-twin",
        "--dynamic",
        "x:0=batch:2..64",
        "--dynamic",
        "ids:0=batch",
        "--atol",
        "0.01",
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return built


def test_diff_names_range_and_tolerance(mixed_pkg: Built, wider_pkg: Built, tmp_path: Path) -> None:
    out = tmp_path / "diff.json"
    proc = run_cli("diff", str(mixed_pkg.path), str(wider_pkg.path), "--json", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    validate("diff", data)
    changes = {(c["section"], c["item"]): (c["a"], c["b"]) for c in data["changes"]}
    assert changes[("contract", "symbol batch range")] == ("[2, 32]", "[2, 64]")
    assert changes[("contract", "input x dim 0")] == ("batch[2..32]", "batch[2..64]")
    assert changes[("tolerances", "output[0] build check atol")] == ("0.0001", "0.01")
    assert changes[("golden", "sample max sizes")] == ("batch=32", "batch=64")
    # same model, same seed, same host: weights, target and toolchain agree
    assert {c["section"] for c in data["changes"]} <= {"contract", "tolerances", "golden"}, data["changes"]
    assert "~ symbol batch range" in proc.stdout and "[2, 32] -> [2, 64]" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("differ: ")
    # a range widened and a looser tolerance break no caller: --fail-on breaking lets it through
    assert data["breaking"] == 0, [c for c in data["changes"] if c["impact"] == "breaking"]
    assert proc.stdout.rstrip().endswith("all compatible for callers")
    gate = run_cli("diff", str(mixed_pkg.path), str(wider_pkg.path), "--fail-on", "breaking")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    # the other way round the range narrows (2..64 -> 2..32): breaking, exit 1
    back = run_cli("diff", str(wider_pkg.path), str(mixed_pkg.path), "--fail-on", "breaking")
    assert back.returncode == 1, back.stdout + back.stderr
    assert "BREAKING batch[2..64] -> batch[2..32]" in back.stdout


def test_diff_same_and_usage(mixed_pkg: Built, tmp_path: Path) -> None:
    same = run_cli("diff", str(mixed_pkg.path), str(mixed_pkg.path), "--json", "-")
    assert same.returncode == 0, same.stdout + same.stderr
    assert json.loads(same.stdout)["same"] is True
    assert "the manifests agree" in same.stderr  # the text goes to stderr when JSON takes stdout
    missing = run_cli("diff", str(mixed_pkg.path), str(tmp_path / "nope.pt2"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    clobber = run_cli("diff", str(mixed_pkg.path), str(mixed_pkg.path), "--json", str(mixed_pkg.path))
    assert clobber.returncode == 2 and "would overwrite package A" in clobber.stderr
    assert run_cli("diff", str(mixed_pkg.path)).returncode == 2
