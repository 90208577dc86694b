"""Issue 25, defect 4: no path a run writes ever destroys a file it reads or another output.

The matrix: every writing flag x every protected path x every way the run would otherwise end
(passed: exit 0, a failed check: 1, a refused command line: 2, the tool unable to run: 3). A run
whose output would destroy a file is refused with exit 2 before any work, the file is byte for
byte what it was, and no report lands on it. The refused runs are fast (nothing is compiled); the
packages they name are the session's. Signals: tests/integration/test_signals.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from aoti_guard import cli as aoti_cli
from runtime_probe import cli as probe_cli

from .conftest import MODELS, Built

pytestmark = pytest.mark.integration

PROBE_WRITERS = ("--json", "--junit", "--log-file", "--save-inputs", "--save-outputs")
PROBE_PROTECTED = ("package", "public-key", "weights", "inputs", "report")
BUILD_WRITERS = ("--json", "--junit", "--log-file", "--keep-onnx")
BUILD_PROTECTED = ("factory", "program", "sign-key", "report")
FOLDER_NAMES = {"--save-inputs": ".inputs.safetensors", "--save-outputs": ".outputs.safetensors"}


@dataclass
class Case:
    argv: list[str]
    protected: Path | None  # a file the run reads: must stay byte for byte
    before: bytes | None
    earlier_report: Path | None = None  # for report x report: the first report must stay a JSON report
    env: dict[str, str] | None = None


def _wrong_inputs(path: Path) -> Path:
    import torch

    from runtime_probe.formats import safetensors as _safetensors

    _safetensors.dump({"x": torch.rand(3, 5)}, path)  # the static model takes x of shape (4, 8)
    return path


def _other_report(flag: str) -> str:
    return "--junit" if flag == "--json" else "--json"


def probe_case(pkg: Path, tmp: Path, flag: str, kind: str, scenario: str) -> Case:
    """``flag`` pointed at the ``kind`` of file the probe reads, in a run that would otherwise end
    as ``scenario`` says."""
    folder = flag in FOLDER_NAMES
    name = (
        "p" + FOLDER_NAMES[flag] if folder else {"package": "m.pt2", "public-key": "k.pub", "report": "first.json"}.get(kind, f"{kind}.st")
    )
    where = tmp / "d"
    where.mkdir()
    target = where / name
    argv: list[str] = []
    package = tmp / "m.pt2"
    package.write_bytes(pkg.read_bytes())
    if kind == "package":
        package = target
        package.write_bytes(pkg.read_bytes())
    elif kind == "inputs":
        _wrong_inputs(target)
        argv += ["--inputs", str(target)]
    elif kind in ("public-key", "weights"):
        target.write_bytes(b"not a key, not weights: must survive")
        argv += [f"--{kind}", str(target)]
    earlier = None
    if kind == "report":  # for a folder flag: a report inside the folder, named like the files it gets
        earlier = target
        argv += ["--json" if folder else _other_report(flag), str(earlier)]
    argv += [flag, str(where if folder else target)]
    env = None
    if scenario == "fail" and kind != "inputs":
        argv += ["--inputs", str(_wrong_inputs(tmp / "wrong.safetensors"))]
    elif scenario == "usage":
        argv += ["--no-such-flag"]
    elif scenario == "tool":
        env = {"TMPDIR": str(tmp / "no-such-tmpdir")}
    if kind == "report":
        return Case([str(package), *argv, "--fast", "--no-escalate"], None, None, earlier, env)
    return Case([str(package), *argv, "--fast", "--no-escalate"], target, target.read_bytes(), None, env)


def build_case(tmp: Path, flag: str, kind: str, scenario: str) -> Case:
    factory = tmp / "f.py"
    if scenario == "fail":
        factory.write_text("def static():\n    raise RuntimeError('a factory that fails: exit 1')\n")
    else:
        factory.write_text(MODELS.read_text())
    target = f"{factory}:static"
    argv: list[str] = ["-o", str(tmp / "out.pt2"), "--no-debug-twin"]
    protected: Path | None
    earlier = None
    if kind == "factory":
        protected = factory
    elif kind == "program":
        protected = tmp / "prog.pt2"
        protected.write_bytes(b"a saved ExportedProgram stands here: must survive")
        target = str(protected)
    elif kind == "sign-key":
        protected = tmp / "release.key"
        protected.write_bytes(b"a private key stands here: must survive")
        argv += ["--sign-key", str(protected)]
    else:
        protected, earlier = None, tmp / "first.report"
        argv += [_other_report(flag), str(earlier)]
    if flag == "--keep-onnx":
        argv += ["--reference", "onnxruntime"]
    argv += [flag, str(protected or earlier)]
    if scenario == "usage":
        argv += ["--no-such-flag"]
    before = protected.read_bytes() if protected is not None else None
    return Case(["build", target, *argv], protected, before, earlier)


def _run_in_process(main: Callable[[list[str]], int], case: Case, monkeypatch: pytest.MonkeyPatch) -> int:
    for key, value in (case.env or {}).items():
        monkeypatch.setenv(key, value)
    return main(case.argv)


def _assert_nothing_lost(case: Case, code: int, err: str) -> None:
    assert code == 2, f"exit {code}, expected 2 (refused before any work): {err[-600:]}"
    if case.protected is not None:
        assert case.protected.read_bytes() == case.before, f"{case.protected} was overwritten"
    if case.earlier_report is not None and case.earlier_report.exists():
        # the one output the rule kept holds the refusal, whole (never a log or saved tensors)
        data = case.earlier_report.read_bytes()
        assert data.startswith(b"<?xml") or json.loads(data)["exit_code"] == 2, "a report was replaced by another output"


@pytest.mark.parametrize("scenario", ["pass", "fail", "usage", "tool"])
@pytest.mark.parametrize("kind", PROBE_PROTECTED)
@pytest.mark.parametrize("flag", PROBE_WRITERS)
@pytest.mark.parametrize("command", ["aoti-guard probe", "python -m runtime_probe"])
def test_probe_never_writes_over_what_it_reads(
    static_pkg: Built,
    tmp_path: Path,
    command: str,
    flag: str,
    kind: str,
    scenario: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = probe_case(static_pkg.path, tmp_path, flag, kind, scenario)
    if command == "aoti-guard probe":
        case.argv = ["probe", *case.argv]
        code = _run_in_process(aoti_cli.main, case, monkeypatch)
    else:
        code = _run_in_process(probe_cli.main, case, monkeypatch)
    _assert_nothing_lost(case, code, capsys.readouterr().err)


@pytest.mark.parametrize("scenario", ["pass", "fail", "usage"])
@pytest.mark.parametrize("kind", BUILD_PROTECTED)
@pytest.mark.parametrize("flag", BUILD_WRITERS)
def test_build_never_writes_over_what_it_reads(
    tmp_path: Path, flag: str, kind: str, scenario: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = build_case(tmp_path, flag, kind, scenario)
    _assert_nothing_lost(case, _run_in_process(aoti_cli.main, case, monkeypatch), capsys.readouterr().err)


@pytest.mark.parametrize("scenario", ["pass", "fail", "usage"])
def test_build_output_never_replaces_the_saved_program_it_builds_from(
    tmp_path: Path, scenario: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real torch.export.save file, a documented TARGET: it was replaced by the package (exit 0)."""
    import torch

    sys.path.insert(0, str(MODELS.parent))
    try:
        import models
    finally:
        sys.path.pop(0)
    program = tmp_path / "prog.pt2"
    model, args = models.static()
    torch.export.save(torch.export.export(model, args), str(program))
    argv = ["build", str(program), "-o", str(program), "--no-debug-twin", "--json", str(tmp_path / "r.json")]
    argv += ["--no-such-flag"] if scenario == "usage" else []
    case = Case(argv, program, program.read_bytes())
    _assert_nothing_lost(case, _run_in_process(aoti_cli.main, case, monkeypatch), capsys.readouterr().err)
    assert json.loads((tmp_path / "r.json").read_text())["phases"][0]["findings"][0]["code"] == "tool.usage"


def _probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "runtime_probe", *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


@pytest.mark.parametrize("scenario,expected", [("pass", 0), ("fail", 1), ("usage", 2), ("tool", 3)])
def test_every_exit_writes_each_output_once_and_reads_stay(static_pkg: Built, tmp_path: Path, scenario: str, expected: int) -> None:
    """The other side of the rule: outputs that clash with nothing are written on every exit,
    each in its own file, and what the run read is unchanged."""
    pkg = tmp_path / "m.pt2"
    pkg.write_bytes(static_pkg.path.read_bytes())
    (tmp_path / "in").mkdir()
    inputs = _wrong_inputs(tmp_path / "in" / "captured.safetensors")  # beside the saved files, not named like them
    before = {p: p.read_bytes() for p in (pkg, inputs)}
    outs = {"--json": tmp_path / "r.json", "--junit": tmp_path / "r.xml", "--log-file": tmp_path / "run.log"}
    args = [str(pkg), "--fast", "--no-escalate", "--save-inputs", str(tmp_path / "in"), "--save-outputs", str(tmp_path / "in")]
    args += [a for flag, path in outs.items() for a in (flag, str(path))]
    env = {"TMPDIR": str(tmp_path / "missing")} if scenario == "tool" else None
    if scenario == "fail":
        args += ["--inputs", str(inputs)]
    elif scenario == "usage":
        args += ["--iterations", "zero"]
    proc = _probe(*args, env=env)
    assert proc.returncode == expected, proc.stderr[-1000:]
    report = json.loads(outs["--json"].read_text())
    assert report["exit_code"] == expected
    assert outs["--junit"].read_text().startswith("<?xml")
    assert {p: p.read_bytes() for p in before} == before
    if scenario == "pass":
        assert (tmp_path / "in" / "example.inputs.safetensors").exists() and (tmp_path / "in" / "example.outputs.safetensors").exists()


def test_save_outputs_takes_the_same_folder_twice(static_pkg: Built, tmp_path: Path) -> None:
    """Issue 25, defect 6: --save-outputs refused its own folder on the second run (it was
    declared a file); --save-inputs never did. Both command lines."""
    folder = tmp_path / "saved"
    for argv in (["probe"], ["probe"], []):
        cmd = [sys.executable, "-P", "-m", "aoti_guard", *argv] if argv else [sys.executable, "-P", "-m", "runtime_probe"]
        proc = subprocess.run(
            [*cmd, str(static_pkg.path), "--fast", "--no-escalate", "-q", "--save-outputs", str(folder), "--save-inputs", str(folder)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-1000:]
    assert sorted(p.name for p in folder.iterdir()) == ["example.inputs.safetensors", "example.outputs.safetensors"]
