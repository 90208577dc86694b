"""The modules that register a package's user ops (runtime_probe/runtime/user_modules.py, issue 43)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aoti_guard.builder.resolve.target import target_module
from runtime_probe.child.failures import Reporter, failure_finding
from runtime_probe.child.worker import ChildRaised
from runtime_probe.runtime import user_modules

TORCH_TEXT = (
    "Could not find schema for mylib::scale. Custom operators created via torch.library.custom_op cannot be run via AOTI "
    "without Python environment."
)


def test_the_missing_op_is_read_off_torchs_message() -> None:
    assert user_modules.missing_op("RuntimeError: " + TORCH_TEXT) == "mylib::scale"
    assert user_modules.missing_op("RuntimeError: something else") is None


def test_the_specs_travel_to_a_child_through_its_environment(tmp_path: Path) -> None:
    env = user_modules.child_env(["pkg.mod", "ops.py"])
    specs = user_modules.specs_from_env(env)
    assert specs[0] == "pkg.mod"
    assert specs[1].endswith("/ops.py") and Path(specs[1]).is_absolute()  # a child may run elsewhere
    assert user_modules.child_env([]) == {}


def test_a_file_is_imported_once(tmp_path: Path) -> None:
    path = tmp_path / "registers_ops.py"
    path.write_text("COUNT = [0]\nCOUNT[0] += 1\n")
    first = user_modules.import_module(str(path))
    second = user_modules.import_module(str(path))
    assert first is second and first.COUNT == [1]
    sys.modules.pop(first.__name__, None)
    with pytest.raises(FileNotFoundError):
        user_modules.import_module(str(tmp_path / "absent.py"))


def test_a_child_that_lacks_the_op_is_load_missing_op_with_the_remedy() -> None:
    exc = ChildRaised("load", "", "", 0.1, None, {"type": "RuntimeError", "message": TORCH_TEXT})
    finding = failure_finding(exc, "loading the package", "load", Reporter("load"))
    assert finding.code == "load.missing_op"
    assert "mylib::scale" in finding.message
    assert finding.hint is not None and "--import" in finding.hint


def test_a_module_given_that_does_not_import_is_load_import_failed_not_escalated() -> None:
    text = f"importing nosuch_mod {user_modules.IMPORT_FAILED} ModuleNotFoundError: No module named 'nosuch_mod'"
    exc = ChildRaised("load", "", "", 0.1, None, {"type": "ImportError", "message": text})
    finding = failure_finding(exc, "loading the package", "load", Reporter("load"))
    assert finding.code == "load.import_failed"  # not load.error: the probe's load phase escalates no known cause
    assert "nosuch_mod" in finding.message and "No module named" in finding.message
    assert finding.hint is not None and "--import" in finding.hint


@pytest.mark.parametrize(
    ("target", "module"),
    [("models.py:make", "models.py"), ("pkg.mod:make", "pkg.mod"), (None, None), ("nofunc.py", None)],
)
def test_the_targets_module_is_what_the_user_wrote(target: str | None, module: str | None) -> None:
    assert target_module(target) == module
