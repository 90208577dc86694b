"""The one rule for every path a run writes (runtime_probe/reporting/paths.py, aoti_guard/builder/outputs.py),
the lenient reading of a refused command line, and the isolation flags of every child."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from aoti_guard import _proc
from aoti_guard.builder.outputs import build_paths, rejected_path, target_file
from runtime_probe.child.isolation import child_environment, isolated_pythonpath, python_argv
from runtime_probe.cli import lenient_values
from runtime_probe.ladder.readers import debugger_outcome
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.paths import Paths, Read, Write, probe_paths


def test_a_report_over_a_read_file_is_refused_and_says_which(tmp_path: Path) -> None:
    pkg = tmp_path / "m.pt2"
    pkg.write_bytes(b"x")
    paths = probe_paths(str(pkg), {"json": str(pkg)})
    with pytest.raises(UsageError, match=r"--json .*m\.pt2 would overwrite the package being checked"):
        paths.check()
    assert not paths.usable("--json")


def test_two_outputs_on_one_file_keep_the_first(tmp_path: Path) -> None:
    report = str(tmp_path / "r")
    paths = probe_paths("p.pt2", {"json": report, "junit": report, "log_file": report})
    assert [w.flag for w, _, _ in paths.problems()] == ["--junit", "--log-file"]
    assert paths.usable("--json") and not paths.usable("--junit") and not paths.usable("--log-file")


def test_both_reports_on_stdout_are_refused() -> None:
    with pytest.raises(UsageError, match="both ask for stdout"):
        probe_paths("p.pt2", {"json": "-", "junit": "-"}).check()
    probe_paths("p.pt2", {"json": "-", "junit": "r.xml", "log_file": "/dev/null"}).check()


def test_a_device_may_take_two_outputs() -> None:
    probe_paths("p.pt2", {"json": os.devnull, "log_file": os.devnull}).check()


def test_a_folder_writer_refuses_only_the_names_it_writes(tmp_path: Path) -> None:
    captured = tmp_path / "example.inputs.safetensors"
    other = tmp_path / "request.safetensors"
    for f in (captured, other):
        f.write_bytes(b"x")
    with pytest.raises(UsageError, match=r"--save-inputs .* would overwrite the --inputs file"):
        probe_paths("p.pt2", {"inputs": str(captured), "save_inputs": str(tmp_path)}).check()
    probe_paths("p.pt2", {"inputs": str(other), "save_inputs": str(tmp_path)}).check()
    probe_paths("p.pt2", {"inputs": str(captured), "save_outputs": str(tmp_path)}).check()
    with pytest.raises(UsageError, match=r"--json .* is also --save-outputs"):
        probe_paths("p.pt2", {"save_outputs": str(tmp_path), "json": str(tmp_path / "a.outputs.safetensors")}).check()


def test_check_file_asks_again_for_a_name_known_late(tmp_path: Path) -> None:
    weights = tmp_path / "w.inputs.safetensors"
    weights.write_bytes(b"x")
    rule = Paths((Read("the --weights file", str(weights)),), (Write("--save-inputs", str(tmp_path / "other")),))
    rule.check()
    with pytest.raises(UsageError, match="the --weights file"):
        rule.check_file("--save-inputs", str(weights))
    rule.check_file("--save-inputs", str(tmp_path / "example.inputs.safetensors"))


def test_a_symlink_to_a_read_file_is_the_file(tmp_path: Path) -> None:
    key = tmp_path / "release.key"
    key.write_bytes(b"k")
    (tmp_path / "link").symlink_to(key)
    with pytest.raises(UsageError, match="the signing key"):
        build_paths(None, {"output": str(tmp_path / "m.pt2"), "sign_key": str(key), "junit": str(tmp_path / "link")}).check()


def test_build_paths_protect_the_target_and_the_rejected_package(tmp_path: Path) -> None:
    factory = tmp_path / "f.py"
    program = tmp_path / "prog.pt2"
    for f in (factory, program):
        f.write_bytes(b"x")
    assert target_file(f"{factory}:make") == str(factory)
    assert target_file(str(program)) == str(program)
    assert target_file("package.module:make") is None and target_file(None) is None
    with pytest.raises(UsageError, match="would overwrite the build target"):
        build_paths(f"{factory}:make", {"output": str(tmp_path / "x.pt2"), "json": str(factory)}).check()
    with pytest.raises(UsageError, match=r"-o .*prog\.pt2 would overwrite the build target"):
        build_paths(str(program), {"output": str(program)}).check()
    out = str(tmp_path / "m.pt2")
    assert rejected_path(out) == str(tmp_path / "m.rejected.pt2")
    with pytest.raises(UsageError, match=r"--json .* is also -o \(its rejected build\)"):
        build_paths(None, {"output": out, "json": rejected_path(out)}).check()
    with pytest.raises(UsageError, match=r"--json .* is also --keep-onnx"):
        build_paths(None, {"output": out, "json": str(tmp_path / "r"), "keep_onnx": str(tmp_path / "r")}).check()


def test_lenient_values_never_take_a_flags_value_for_the_positional() -> None:
    positional, values = lenient_values(["--timeout", "abc", "m.pt2", "--junit", "r.xml", "-q", "--bogus"])
    assert positional == "m.pt2" and values["junit"] == "r.xml" and values["quiet"] is True
    assert lenient_values(["m.pt2", "--json"]) == (None, {})  # a flag without its value


def test_every_child_is_started_with_the_working_directory_off_its_path() -> None:
    assert python_argv("m", "a")[:2] == [sys.executable, "-P"] and python_argv("m")[-2:] == ["-m", "m"]
    assert _proc.python_argv("aoti_guard.builder.twin.child", "r")[1] == "-P"
    here = os.getcwd()
    assert isolated_pythonpath(os.pathsep.join(["", ".", "rel/dir", "/abs/dir"]), ("/first",)) == os.pathsep.join(["/first", "/abs/dir"])
    env = child_environment({"PYTHONPATH": os.pathsep.join(["", here, "x"])})
    entries = env["PYTHONPATH"].split(os.pathsep)
    assert "" not in entries and "x" not in entries and all(os.path.isabs(p) for p in entries)


def test_debugger_outcome_names_what_the_program_did() -> None:
    assert debugger_outcome("Program received signal SIGSEGV, Segmentation fault.\n#0 0x0 in f ()") == "SIGSEGV"
    assert debugger_outcome("[Inferior 1 (process 77) exited with code 011]") == "exit 9"
    assert debugger_outcome("[Inferior 1 (process 77) exited normally]") == "exit 0"
    assert debugger_outcome("no debugger lines") is None


def test_the_container_boot_execs_the_probe_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """aoti_guard/container/boot.py (it may import nothing of ours): -P, and an absolute-only
    PYTHONPATH with the mounted copy first."""
    from aoti_guard.container import boot

    started: list[tuple[str, list[str], dict[str, str]]] = []

    class Execed(Exception):
        pass

    def fake_execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        started.append((path, argv, env))
        raise Execed

    monkeypatch.setattr(os, "execve", fake_execve)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", "relative", "/image/lib"]))
    with pytest.raises(Execed):
        boot.main([str(tmp_path), "local", "/aoti-guard/probe", "--", "/aoti-guard/package/m.pt2", "--fast"])
    path, argv, env = started[0]
    assert argv == [path, "-P", "-m", "runtime_probe", "/aoti-guard/package/m.pt2", "--fast"]
    assert env["PYTHONPATH"] == os.pathsep.join(["/aoti-guard/probe", "/image/lib"])
