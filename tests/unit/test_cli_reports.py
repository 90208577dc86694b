"""Both command lines: reports on every exit code, '-' for stdout, never over an input, FIFOs
refused without hanging, --strict, and one declaration of the probe flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from aoti_guard.cli import cli as click_cli
from aoti_guard.cli import main as aoti_guard_main
from runtime_probe.cli import build_parser
from runtime_probe.cli import main as probe_main
from runtime_probe.probe.flags import OUTPUT_FLAGS, PROBE_FLAGS, probe_options
from runtime_probe.probe.options import ProbeOptions
from runtime_probe.reporting.errors import ToolError

from ..schemas import validate
from .fakepkg import make_package, write_key_pair

REPO = Path(__file__).resolve().parents[2]
ENTRY_POINTS = {
    "runtime_probe": lambda args: probe_main(args),
    "aoti-guard": lambda args: aoti_guard_main(["probe", *args]),
}


@pytest.fixture
def unsigned(tmp_path: Path) -> tuple[Path, Path]:
    """A fake package and a public key it is not signed with: the archive phase fails (exit 1)
    before any native code, in a fraction of a second."""
    public = write_key_pair(tmp_path / "release.key")
    return make_package(tmp_path / "m.pt2"), public


def _sub(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "runtime_probe", *args], capture_output=True, text=True, timeout=timeout, env=env)


# -- never over an input (issue 16 item 4)


@pytest.mark.parametrize("cli", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_a_report_over_the_package_is_refused(cli: str, flag: str, unsigned: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pkg, pub = unsigned
    before = pkg.read_bytes()
    assert ENTRY_POINTS[cli]([str(pkg), "--public-key", str(pub), flag, str(pkg)]) == 2
    assert pkg.read_bytes() == before
    assert "would overwrite the package being checked" in capsys.readouterr().err


@pytest.mark.parametrize("which", ["key", "weights"])
def test_a_report_over_the_key_or_weights_is_refused(
    which: str, unsigned: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg, pub = unsigned
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"weights")
    target = pub if which == "key" else weights
    before = target.read_bytes()
    extra = ["--weights", str(weights)] if which == "weights" else []
    monkeypatch.chdir(tmp_path)  # a relative path that names the same file
    assert probe_main([str(pkg), "--public-key", str(pub), *extra, "--json", os.path.relpath(target)]) == 2
    assert target.read_bytes() == before


def test_a_build_report_over_its_output_or_key_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "k"
    write_key_pair(key)
    before = key.read_bytes()
    assert aoti_guard_main(["build", "-o", str(tmp_path / "o.pt2"), "--sign-key", str(key), "--json", str(key)]) == 2
    assert key.read_bytes() == before
    assert aoti_guard_main(["build", "-o", str(tmp_path / "o.pt2"), "--json", str(tmp_path / "o.pt2")]) == 2


# -- FIFOs given as inputs (issue 16 item 6): a usage error at once, never a hang


@pytest.mark.parametrize("flag", ["--public-key", "--weights", "--inputs"])
def test_a_fifo_input_is_a_usage_error_not_a_hang(flag: str, unsigned: tuple[Path, Path], tmp_path: Path) -> None:
    pkg, _ = unsigned
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    proc = _sub(str(pkg), flag, str(fifo), "--json", str(tmp_path / "r.json"), "-q", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "not a regular file" in proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [f["code"] for p in report["phases"] for f in p["findings"]] == ["tool.usage"]
    validate("probe-report", report)


def test_load_with_a_fifo_key_raises_usage_error(tmp_path: Path) -> None:
    fifo = tmp_path / "k.fifo"
    os.mkfifo(fifo)
    code = (
        "import runtime_probe, sys\n"
        "try:\n    runtime_probe.load(sys.argv[1], public_key=sys.argv[2])\n"
        "except runtime_probe.UsageError as e:\n    print('usage:', e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(make_package(tmp_path / "m.pt2")), str(fifo)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert "usage:" in proc.stdout and "not a regular file" in proc.stdout, proc.stdout + proc.stderr


# -- a report on every exit code (issue 15)


def test_exit_1_report_is_schema_valid_and_dash_is_stdout(unsigned: tuple[Path, Path], tmp_path: Path) -> None:
    pkg, pub = unsigned
    proc = _sub(str(pkg), "--public-key", str(pub), "--json", "-")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)  # stdout is the JSON alone; the text summary went to stderr
    assert report["exit_code"] == 1 and "FAILED" in proc.stderr
    assert not (tmp_path / "-").exists()
    validate("probe-report", report)
    junit = _sub(str(pkg), "--public-key", str(pub), "--junit", "-", "-q")
    assert ET.fromstring(junit.stdout).tag == "testsuites"


def test_both_reports_on_stdout_is_a_usage_error(unsigned: tuple[Path, Path]) -> None:
    pkg, _ = unsigned
    assert probe_main([str(pkg), "--json", "-", "--junit", "-"]) == 2


@pytest.mark.parametrize("cli", sorted(ENTRY_POINTS))
def test_usage_error_still_writes_a_report(cli: str, unsigned: tuple[Path, Path], tmp_path: Path) -> None:
    pkg, _ = unsigned
    out, junit = tmp_path / "r.json", tmp_path / "r.xml"
    assert ENTRY_POINTS[cli]([str(pkg), "--no-such-flag", "--json", str(out), "--junit", str(junit)]) == 2
    report = json.loads(out.read_text())
    assert report["exit_code"] == 2 and report["phases"][0]["findings"][0]["code"] == "tool.usage"
    assert report["package"] == {"path": str(pkg)}
    validate("probe-report", report)
    assert ET.parse(junit).getroot().find("testsuite/testcase/failure").get("type") == "tool.usage"  # type: ignore[union-attr]


@pytest.mark.parametrize("raised", [ToolError("the engine went away"), RuntimeError("a bug")])
@pytest.mark.parametrize("cli", sorted(ENTRY_POINTS))
def test_exit_3_still_writes_a_report(
    cli: str, raised: Exception, unsigned: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_: Any, **__: Any) -> None:
        raise raised

    monkeypatch.setattr("runtime_probe.probe.run.probe", boom)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the bug case's saved traceback, not in the machine's /tmp
    pkg, _ = unsigned
    out = tmp_path / "r.json"
    assert ENTRY_POINTS[cli]([str(pkg), "--json", str(out)]) == 3
    report = json.loads(out.read_text())
    code = report["phases"][0]["findings"][0]["code"]
    assert report["exit_code"] == 3 and code == ("tool.failed" if isinstance(raised, ToolError) else "tool.bug")
    validate("probe-report", report)


def test_build_usage_error_writes_a_build_report(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    assert aoti_guard_main(["build", "-o", str(tmp_path / "model.zip"), "--json", str(out)]) == 2
    report = json.loads(out.read_text())
    assert report["kind"] == "build" and report["exit_code"] == 2
    validate("build-report", report)


# -- the flags: declared once, the same in both command lines (issue 11)


def test_both_command_lines_have_the_same_probe_flags_and_defaults() -> None:
    click_probe = click_cli.commands["probe"]
    click_params = {p.name: p for p in click_probe.params}
    argparse_defaults = vars(build_parser().parse_args(["x.pt2"]))
    click_defaults = click_probe.make_context("probe", ["x.pt2"]).params
    for flag in (*PROBE_FLAGS, *OUTPUT_FLAGS):
        assert flag.dest in click_params, flag.name
        assert flag.name in click_params[flag.dest].opts
        click_value, argparse_value = click_defaults[flag.dest], argparse_defaults[flag.dest]
        if flag.multiple:  # click's empty tuple, argparse's None: both "not given" (probe_options reads both so)
            click_value, argparse_value = tuple(click_value) or None, argparse_value and tuple(argparse_value)
        assert click_value == argparse_value == flag.default_value, flag.name
        if flag.field is not None and flag.kind != "switch" and not flag.multiple:
            assert flag.default_value == getattr(ProbeOptions(), flag.field)
        if flag.field is not None and flag.multiple:  # not given: the options' own default, whatever it is
            assert getattr(probe_options({flag.dest: click_defaults[flag.dest]}), flag.field) == getattr(ProbeOptions(), flag.field)


def test_the_same_command_line_gives_the_same_options(tmp_path: Path) -> None:
    folder = str(tmp_path)  # an existing folder: --save-inputs takes one
    argv = ["p.pt2", "--device", "cpu", "--timeout", "12", "--no-escalate", "--fast", "--weights", "w.safetensors"]
    argv += ["--escalate-timeout", "30", "--iterations", "3", "--save-inputs", folder]
    from_argparse = probe_options(vars(build_parser().parse_args(argv)))
    ctx = click_cli.commands["probe"].make_context("probe", list(argv))
    from_click = probe_options(ctx.params)
    expected = ProbeOptions(
        device="cpu",
        timeout_s=12.0,
        escalate=False,
        fast=True,
        weights="w.safetensors",
        escalate_timeout_s=30.0,
        iterations=3,
        save_inputs=folder,
    )
    assert from_argparse == from_click == expected


def test_shapes_repeats_on_both_command_lines() -> None:
    """--shapes given twice keeps both sets, in order (it kept only the last); once, one set."""
    for argv, expected in (
        (["p.pt2", "--shapes", "x:1x16", "--shapes", "x:8x16,mask:8x32"], ("x:1x16", "x:8x16,mask:8x32")),
        (["p.pt2", "--shapes", "x:4x16"], ("x:4x16",)),
        (["p.pt2"], None),
    ):
        from_argparse = probe_options(vars(build_parser().parse_args(argv)))
        from_click = probe_options(click_cli.commands["probe"].make_context("probe", list(argv)).params)
        assert from_argparse.shapes == from_click.shapes == expected, argv


def test_latency_raw_is_checked_before_any_work(unsigned: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--latency-raw: refused without timing, on stdout, over the package or another output, in a
    missing folder; each a usage error (exit 2) before the package is opened."""
    pkg = str(unsigned[0])
    report = str(tmp_path / "r.json")
    for extra, words in (
        (["--latency-raw", str(tmp_path / "raw.json")], "nothing is timed"),
        (["--iterations", "3", "--latency-raw", "-"], "--latency-raw needs a file"),
        (["--iterations", "3", "--latency-raw", pkg], "--latency-raw " + pkg + " would overwrite the package being checked"),
        (["--iterations", "3", "--latency-raw", report, "--json", report], "is also --latency-raw"),
        (["--iterations", "3", "--latency-raw", str(tmp_path / "no" / "raw.json")], "does not exist"),
        (["--verify-only", "--latency-raw", str(tmp_path / "raw.json")], "--latency-raw needs the model loaded"),
    ):
        assert probe_main([pkg, *extra]) == 2, extra
        assert words in capsys.readouterr().err, extra


def test_a_bad_number_is_a_usage_error(unsigned: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pkg, _ = unsigned
    assert probe_main([str(pkg), "--timeout", "0"]) == 2
    assert "--timeout must be at least 1" in capsys.readouterr().err


# -- hostile names and hostile counts from a package (issue 16 item 7)

ESC_NAME = "data/aotinductor/model/\x1b[2J\x1b[31mPASSED\u202e.so"


def test_names_from_the_package_cannot_drive_the_terminal(unsigned: tuple[Path, Path], capfd: pytest.CaptureFixture[str]) -> None:
    pkg = make_package(unsigned[0].parent / "esc.pt2", extra=[(ESC_NAME, b"x")])
    assert probe_main([str(pkg), "-q"]) == 1  # an unlisted entry: the archive phase names it
    out, err = capfd.readouterr()
    assert "\x1b" not in out + err and "\u202e" not in out + err
    assert "\\x1b[2J" in out  # the name is still shown, escaped


def test_inspect_escapes_names_and_has_a_schema_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = make_package(tmp_path / "esc.pt2", extra=[(ESC_NAME, b"x")])
    aoti_guard_main(["inspect", str(pkg)])
    assert "\x1b" not in capsys.readouterr().out
    aoti_guard_main(["inspect", str(pkg), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == "1.0" and data["kind"] == "inspect"
    validate("inspect", data)


def test_hash_findings_are_capped(tmp_path: Path) -> None:
    def many_missing(m: dict[str, Any]) -> None:
        m["hashes"].update({f"data/gone/{i:06d}.bin": "0" * 64 for i in range(20000)})

    pkg = make_package(tmp_path / "many.pt2", edit=many_missing)
    out = tmp_path / "r.json"
    assert probe_main([str(pkg), "--json", str(out), "-q"]) == 1
    assert out.stat().st_size < 200_000  # 20000 findings were ~7 MB
    report = json.loads(out.read_text())
    hashes = [f for p in report["phases"] for f in p["findings"] if f["code"] == "archive.hash_mismatch"]
    assert len(hashes) == 51 and hashes[-1]["evidence"] == {"omitted": 19950, "total": 20000}
    validate("probe-report", report)


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.islink("/dev/stdout"), reason="the data loss needs root and /dev/stdout as a symlink")
def test_json_to_dev_stdout_as_root_keeps_the_symlink(unsigned: tuple[Path, Path]) -> None:
    pkg, pub = unsigned
    target = os.readlink("/dev/stdout")
    proc = _sub(str(pkg), "--public-key", str(pub), "--json", "/dev/stdout")
    assert os.path.islink("/dev/stdout") and os.readlink("/dev/stdout") == target
    assert proc.returncode == 1 and json.loads(proc.stdout)["exit_code"] == 1  # the report came through the pipe
    assert "FAILED" in proc.stderr  # and the text summary went to stderr, so stdout stays JSON


def test_a_misspelt_inductor_config_key_is_refused_before_any_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aoti_guard.builder import pipeline

    def no_step(*_: Any) -> None:
        raise AssertionError("a build step ran before the options were checked")

    monkeypatch.setattr(pipeline, "STEPS", tuple((name, no_step) for name, _ in pipeline.STEPS))
    out = tmp_path / "b.json"
    code = aoti_guard_main(["build", "-o", str(tmp_path / "m.pt2"), "--inductor-config", "max_autotun=true", "--json", str(out)])
    assert code == 2
    assert "max_autotun" in capsys.readouterr().err
    report = json.loads(out.read_text())
    assert report["phases"][0]["findings"][0]["code"] == "tool.usage" and "max_autotune" in json.dumps(report)
    validate("build-report", report)


# -- --strict and --log-file on the build (issue 15): the probe's are tested in tests/integration/test_reports.py


def _build_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build whose only finding is a warning, and which makes torch-style noise on the way: a
    FutureWarning (as torch's LeafSpec deprecation) and a WARNING record on a logger under
    torch._inductor, whose own stderr handler torch._logging sets up with propagate=False."""
    import logging
    import warnings

    from aoti_guard.builder import pipeline
    from runtime_probe.reporting.findings import warning
    from runtime_probe.reporting.report import PhaseResult, Report

    def fake_build(target: Any, options: Any, progress: Any = None, **_: Any) -> Report:
        warnings.warn("isinstance(treespec, LeafSpec) is deprecated", FutureWarning, stacklevel=1)
        logging.getLogger("torch._inductor.fake").warning("TensorFloat32 tensor cores are available")
        progress("debug_twin", "start")
        progress("debug_twin", "passed", 0.01)
        found = warning("build.twin_failed", "debug_twin", "the debug twin did not compile: stand-in")
        phase = PhaseResult("debug_twin", "passed", 0.01, (found,))
        return Report(kind="build", package={"path": options.output}, phases=(phase,), title="build m.pt2")

    monkeypatch.setattr(pipeline, "build", fake_build)


@pytest.mark.parametrize("strict", [False, True])
def test_build_strict_fails_on_warnings(strict: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _build_with_a_warning(monkeypatch)
    out = tmp_path / "b.json"
    argv = ["build", "-o", str(tmp_path / "m.pt2"), "--json", str(out), "-q", *(["--strict"] if strict else [])]
    assert aoti_guard_main(argv) == (1 if strict else 0)
    report = json.loads(out.read_text())
    assert report["exit_code"] == (1 if strict else 0) and report["strict"] is strict
    validate("build-report", report)


def test_build_keeps_torch_noise_off_the_terminal_in_the_report_and_log_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import logging

    import torch._inductor.compile_fx  # noqa: F401 - torch._logging's setup: torch._inductor has its own stderr handler, propagate=False

    inductor = logging.getLogger("torch._inductor")
    handlers_before = list(inductor.handlers)
    _build_with_a_warning(monkeypatch)
    out, log = tmp_path / "b.json", tmp_path / "build.log"
    assert aoti_guard_main(["build", "-o", str(tmp_path / "m.pt2"), "--json", str(out), "--log-file", str(log)]) == 0
    terminal = "".join(capfd.readouterr())
    assert "LeafSpec" not in terminal and "TensorFloat32" not in terminal
    assert "[debug_twin]" in terminal  # the progress itself is still shown
    kept = json.loads(out.read_text())["extra"]["log"]
    assert any("FutureWarning" in line and "LeafSpec" in line for line in kept), kept
    assert any("torch._inductor.fake" in line and "TensorFloat32" in line for line in kept), kept
    text = log.read_text()
    assert "LeafSpec" in text and "TensorFloat32" in text and "[debug_twin] passed" in text
    assert inductor.handlers == handlers_before  # torch's own handlers are back after the build


_FIRST_IMPORT_BUILD = """
import logging, sys
from aoti_guard import cli
from aoti_guard.builder import pipeline
from runtime_probe.reporting.report import Report

assert "torch" not in sys.modules  # the build imports torch itself, after the CLI set up its log

def fake_build(target, options, progress=None, **_):
    import torch  # noqa: F401 - the build's first import of torch, as in a real build
    logging.getLogger("torch.utils.cpp_extension").warning("No CUDA runtime is found, using CUDA_HOME='/usr/local'")
    return Report(kind="build", package={"path": options.output}, phases=(), title="build m.pt2")

pipeline.build = fake_build
sys.exit(cli.main(sys.argv[1:]))
"""


def test_torch_log_lines_stay_off_the_terminal_when_the_build_imports_torch_first(tmp_path: Path) -> None:
    """Issue 44: a CUDA wheel's "No CUDA runtime is found" reached a CPU build's terminal. torch's
    import installs its stderr handler on the "torch" logger; the CLI swapped handlers before torch
    was imported, so every torch log line of a build went to the terminal."""
    out = tmp_path / "b.json"
    proc = subprocess.run(
        [sys.executable, "-c", _FIRST_IMPORT_BUILD, "build", "-o", str(tmp_path / "m.pt2"), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No CUDA runtime" not in proc.stdout + proc.stderr
    kept = json.loads(out.read_text())["extra"]["log"]
    assert "WARNING torch.utils.cpp_extension: No CUDA runtime is found, using CUDA_HOME='/usr/local'" in kept


def test_probe_log_file_gets_every_progress_line(unsigned: tuple[Path, Path], tmp_path: Path) -> None:
    pkg, pub = unsigned
    log = tmp_path / "probe.log"
    proc = _sub(str(pkg), "--public-key", str(pub), "--log-file", str(log), "-q")
    assert proc.returncode == 1
    text = log.read_text()
    assert "[archive] start" in text and "[archive] failed" in text
    assert "[archive]" not in proc.stderr  # -q: the terminal got no progress, the log file did


def test_build_json_dash_is_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _build_with_a_warning(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert aoti_guard_main(["build", "-o", str(tmp_path / "m.pt2"), "--json", "-", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)  # stdout holds the JSON alone
    assert report["kind"] == "build" and not (tmp_path / "-").exists()
    validate("build-report", report)


@pytest.mark.parametrize("raised", [ToolError("the engine went away"), RuntimeError("a bug")])
def test_build_exit_3_still_writes_a_report(raised: Exception, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aoti_guard.builder import pipeline

    def boom(*_: Any, **__: Any) -> None:
        raise raised

    monkeypatch.setattr(pipeline, "build", boom)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the saved traceback of the bug case (TMPDIR is read once)
    out, junit = tmp_path / "b.json", tmp_path / "b.xml"
    assert aoti_guard_main(["build", "-o", str(tmp_path / "m.pt2"), "--json", str(out), "--junit", str(junit), "-q"]) == 3
    assert len(list(tmp_path.glob("aoti-guard-crash-*.txt"))) == (0 if isinstance(raised, ToolError) else 1)
    report = json.loads(out.read_text())
    code = report["phases"][0]["findings"][0]["code"]
    assert report["kind"] == "build" and report["exit_code"] == 3
    assert code == ("tool.failed" if isinstance(raised, ToolError) else "tool.bug")
    validate("build-report", report)
    assert ET.parse(junit).getroot().find("testsuite/testcase/failure").get("type") == code  # type: ignore[union-attr]
