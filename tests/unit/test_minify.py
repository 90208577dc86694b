"""The minifier driver's pure parts: when it runs, where it writes, what its log says."""

from __future__ import annotations

from pathlib import Path

import pytest

from aoti_guard.builder.minify.driver import MARKER, check_minify_dir, minify_dir, minify_reason, parse_minifier_log
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import error, warning
from runtime_probe.reporting.report import make_phase

# Lines as torch 2.13's minifier prints them (interleaved with warnings and strategy lines).
LOG = """\
E1122 03:15:11.295000 24624 torch/_dynamo/utils.py:3706] RMSE (res-fp64): 0.80112, (ref-fp64): 0.00000
Started off with 10 nodes
W1122 03:15:11.297000 24624 torch/_dynamo/repro/aoti.py:207] Writing checkpoint with 10 nodes to /m/torch_compile_debug/run_1-pid_2/minifier/checkpoints/10.py
Strategy: Truncate suffix (G: 4) (10 nodes, 1 inputs)
SUCCESS: Went from 10 to 6 nodes
W1122 03:15:36.177000 24624 torch/_dynamo/repro/aoti.py:207] Writing checkpoint with 6 nodes to /m/torch_compile_debug/run_1-pid_2/minifier/checkpoints/6.py
Made 10 queries
W1122 03:16:06.743000 24624 torch/_dynamo/repro/aoti.py:207] Writing checkpoint with 3 nodes to /m/torch_compile_debug/run_1-pid_2/minifier/checkpoints/3.py
W1122 03:16:06.762000 24624 torch/_dynamo/repro/aoti.py:226] Copying repro file for convenience to /m/repro.py
Wrote minimal repro out to repro.py
"""


def test_parse_a_finished_run() -> None:
    log = parse_minifier_log(LOG)
    assert (log.nodes_before, log.nodes_after, log.finished) == (10, 3, True)
    assert log.checkpoint == "/m/torch_compile_debug/run_1-pid_2/minifier/checkpoints/3.py"


def test_parse_a_run_stopped_midway() -> None:
    cut = LOG[: LOG.index("Made 10 queries")]
    log = parse_minifier_log(cut)
    assert (log.nodes_before, log.nodes_after, log.finished) == (10, 6, False)


def test_parse_nothing() -> None:
    log = parse_minifier_log("Traceback (most recent call last):\nRuntimeError: boom\n")
    assert (log.nodes_before, log.nodes_after, log.checkpoint, log.finished) == (None, None, None, False)


def _phases(*codes: str) -> list:  # type: ignore[type-arg]
    findings = [error(c, "validate", "x") if c != "build.reference_disagrees" else warning(c, "validate", "x") for c in codes]
    return [make_phase("validate", 0.0, findings)]


def test_when_the_minifier_runs() -> None:
    assert minify_reason(_phases("build.compile_failed")) is not None
    assert minify_reason(_phases("build.validation_failed", "build.compiler_suspect")) is not None
    assert minify_reason(_phases("build.validation_failed")) is not None  # no second reference: fp64 backs it
    # eager and ONNX Runtime disagree: the model's numerics, not the compiler
    assert minify_reason(_phases("build.validation_failed", "build.reference_disagrees")) is None
    assert minify_reason(_phases()) is None
    assert minify_reason(_phases("build.nonfinite")) is None


def test_minify_dir_sits_beside_the_output(tmp_path: Path) -> None:
    assert minify_dir(str(tmp_path / "model.pt2")) == str(tmp_path / "model.minify")


def test_a_foreign_folder_is_never_reused(tmp_path: Path) -> None:
    target = tmp_path / "model.minify"
    check_minify_dir(str(target))  # absent: fine
    target.mkdir()
    check_minify_dir(str(target))  # empty: fine
    (target / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not made by aoti-guard"):
        check_minify_dir(str(target))
    (target / MARKER).write_text("")
    check_minify_dir(str(target))  # ours from a previous run


def _with_stage(first: str) -> list:  # type: ignore[type-arg]
    stage = error("build.first_divergence", "validate", "x", evidence={"first": first})
    return [make_phase("validate", 0.0, [error("build.validation_failed", "validate", "x"), stage])]


def test_the_minifier_runs_only_for_a_compiler_stage() -> None:
    assert minify_reason(_with_stage("inductor")) is not None
    assert minify_reason(_with_stage("package")) is not None
    for before_the_compiler in ("eager", "export", "decompose"):
        assert minify_reason(_with_stage(before_the_compiler)) is None
