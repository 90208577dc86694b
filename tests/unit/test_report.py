"""The report model and its renderings; finding codes are registered."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from runtime_probe.reporting.errors import ToolError
from runtime_probe.reporting.findings import CODES, Finding, Severity, error, info, warning
from runtime_probe.reporting.report import REPORT_SCHEMA_VERSION, Report, junit_xml, make_phase, render_text, write_json


def _report() -> Report:
    return Report(
        kind="probe",
        package={"path": "/x/model.pt2"},
        phases=(
            make_phase("archive", 0.1, [info("manifest.missing", "archive", "plain")]),
            make_phase("host", 0.2, [error("env.cpu_isa_missing", "host", "no avx512f", expected="avx512f", found="avx2", hint="rebuild")]),
            make_phase("load", 0.0, [], skipped_reason="host failed"),
        ),
    )


def test_unregistered_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unregistered"):
        Finding("archive.typo", Severity.ERROR, "archive", "x")


def test_codes_are_dotted_and_phased() -> None:
    prefixes = {
        "archive",
        "package",
        "manifest",
        "env",
        "load",
        "constants",
        "input",
        "output",
        "run",
        "golden",
        "escalate",
        "build",
        "tool",
    }
    assert all(code.split(".", 1)[0] in prefixes for code in CODES)


def test_exit_code_follows_errors() -> None:
    r = _report()
    assert not r.passed and r.exit_code == 1
    ok = Report(kind="probe", package={}, phases=(make_phase("archive", 0.1, [warning("manifest.missing", "archive", "plain")]),))
    assert ok.passed and ok.exit_code == 0


def test_text_has_one_line_per_finding_and_footer() -> None:
    text = render_text(_report())
    assert "ERROR env.cpu_isa_missing: no avx512f (expected avx512f, found avx2)" in text
    assert "hint: rebuild" in text
    assert "manifest.missing" not in text  # info hidden unless verbose
    assert "manifest.missing" in render_text(_report(), verbose=True)
    assert text.rstrip().endswith("FAILED: 1 error(s), 0 warning(s)")


def test_info_in_a_failed_phase_is_shown_without_verbose() -> None:
    # The ladder's verified remedy is an info finding next to the error it fixes: a user reading
    # the text report must see the command to apply, not only the JSON.
    remedy = info("env.cxx_runtime_mismatch", "escalate", "verified remedy: with LD_PRELOAD=/lib/libstdc++.so.6 the package loads")
    cause = error("env.cxx_runtime_mismatch", "escalate", "C++ runtime mismatch", hint="see the remedy")
    report = Report(kind="probe", package={}, phases=(make_phase("escalate", 1.0, [cause, remedy]),))
    text = render_text(report)
    assert "info  env.cxx_runtime_mismatch: verified remedy: with LD_PRELOAD=/lib/libstdc++.so.6" in text
    assert text.rstrip().endswith("FAILED: 1 error(s), 0 warning(s)")


def test_json_round_trip_and_version_refusal(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_json(_report(), path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == REPORT_SCHEMA_VERSION and data["exit_code"] == 1
    again = Report.from_dict(data)
    assert [f.code for f in again.findings] == [f.code for f in _report().findings]
    data["schema_version"] = "2.0"
    with pytest.raises(ToolError, match="newer"):
        Report.from_dict(data)


def test_junit_has_a_testcase_per_phase() -> None:
    root = ET.fromstring(junit_xml(_report()))
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == ["archive", "host", "load"]
    assert cases[1].find("failure") is not None and cases[1].find("failure").get("type") == "env.cpu_isa_missing"  # type: ignore[union-attr]
    assert cases[2].find("skipped") is not None


def test_text_and_junit_escape_control_characters() -> None:
    hostile = "name\x1b[31m\u202e\nFAKE LINE\x00"
    r = Report(
        kind="probe",
        package={"path": "p\x1b]0;title\x07.pt2"},
        phases=(make_phase("archive", 0.0, [error("archive.unsafe_entry", "archive", hostile, found=hostile)]),),
    )
    text = render_text(r)
    assert "\x1b" not in text and "\u202e" not in text and "\x00" not in text and "\x07" not in text
    assert "\\x1b[31m\\u202e\\x0aFAKE LINE" in text  # the message stays one line
    # a multi-line found is shown line by line (torch's messages are), each behind the "|" margin:
    # the head, the phase, the finding, the found block, the verdict, and no line a package wrote alone
    lines = text.splitlines()
    assert lines[3:6] == ["            found:", "            | name\\x1b[31m\\u202e", "            | FAKE LINE\\x00"]
    assert len(lines) == 7 and lines[-1] == "FAILED: 1 error(s), 0 warning(s)"
    ET.fromstring(junit_xml(r))  # well-formed XML (a raw \x1b or \x00 would not be)


def test_strict_makes_warnings_fail() -> None:
    phases = (make_phase("archive", 0.1, [warning("manifest.missing", "archive", "plain")]),)
    lax, strict = Report(kind="probe", package={}, phases=phases), Report(kind="probe", package={}, phases=phases, strict=True)
    assert (lax.exit_code, lax.passed) == (0, True)
    assert (strict.exit_code, strict.passed) == (1, False)
    assert "FAILED: 0 error(s), 1 warning(s) (--strict: warnings fail)" in render_text(strict)
    assert Report.from_dict(strict.to_dict()).exit_code == 1
    ok = Report(kind="probe", package={}, phases=(make_phase("archive", 0.1, [info("manifest.missing", "archive", "x")]),), strict=True)
    assert ok.exit_code == 0  # info findings never fail


def test_build_summary_shows_the_golden_coverage_and_marks_a_missing_bound() -> None:
    # issue 12: the build summary shows which sizes the golden samples reached
    coverage = {"batch": {"min": 1, "max": 16, "tested": [1, 2, 16]}, "seq": {"min": 1, "max": 128, "tested": [1, 8]}}
    report = Report(kind="build", package={}, phases=(make_phase("validate", 1.0, [], {"coverage": coverage}),))
    line = next(ln.strip() for ln in render_text(report).splitlines() if "coverage:" in ln)
    assert line == "coverage: batch 1..16 tested 1, 2, 16; seq 1..128 tested 1, 8 MISSING max"
    assert "coverage:" not in render_text(_report())  # a probe report has none


def test_a_pass_with_new_weights_says_under_the_verdict_that_nothing_was_compared() -> None:
    """Issue 43: new weights are run and checked for NaN/Inf only; the text report says so under
    PASSED, with or without -v, and how to get references."""
    note = info("constants.new_weights", "constants", "the weights differ from the build's: NOT compared", hint="build a package with them")
    r = Report(kind="probe", package={"path": "m.pt2"}, phases=(make_phase("constants", 0.1, [note]), make_phase("golden", 0.1, [])))
    text = render_text(r)
    assert r.passed
    tail = text.splitlines()[-3:]
    assert (
        tail[0].startswith("PASSED")
        and "NOT CHECKED: the weights differ from the build's" in tail[1]
        and "hint: build a package" in tail[2]
    )
    assert "NOT CHECKED" not in render_text(_report())


def test_references_made_for_weights_not_given_are_said_under_the_verdict() -> None:
    """Issue 43: a package whose references were made for weights given at load, probed without
    them, ran the .so's own weights uncompared: the text report says so under PASSED."""
    note = info(
        "constants.references_need_weights",
        "constants",
        "the golden references were made for the weights new.safetensors",
        hint="--weights",
    )
    r = Report(kind="probe", package={"path": "m.pt2"}, phases=(make_phase("constants", 0.1, [note]),))
    tail = render_text(r).splitlines()[-3:]
    assert tail[0].startswith("PASSED") and tail[1] == "  NOT CHECKED: the golden references were made for the weights new.safetensors"


def test_the_text_report_says_an_inputs_file_ran_and_with_which_inputs() -> None:
    """Issue 44: a probe with --inputs says which file ran and which inputs it fed; without one, nothing."""
    runs = [{"sample": "max", "stored": "full"}, {"sample": "inputs", "file": "/data/req\\x1b.safetensors", "inputs": ["x", "ids"]}]
    report = Report(kind="probe", package={"path": "m.pt2"}, phases=(make_phase("golden", 0.1, [], {"runs": runs}),))
    lines = [ln.strip() for ln in render_text(report).splitlines() if "--inputs" in ln]
    assert lines == ["ran --inputs /data/req\\x1b.safetensors: inputs x, ids"]
    plain = Report(kind="probe", package={"path": "m.pt2"}, phases=(make_phase("golden", 0.1, [], {"runs": runs[:1]}),))
    assert "--inputs" not in render_text(plain)
