"""The one reader of numbers in package and report JSON (issue 40, finding 7): a number out of
range or in another script's digits is the reader's finding or error, never an OverflowError or a
ValueError from int()."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime_probe.formats.numbers import NumberError, finite_float, json_int, schema_version
from runtime_probe.package.archive import open_archive
from runtime_probe.package.manifest import parse_manifest
from runtime_probe.package.manifest_rules import check_manifest
from runtime_probe.reporting.errors import ToolError
from runtime_probe.reporting.report import Report, make_phase
from runtime_probe.runtime import layout
from runtime_probe.trust.signature import SignatureEntry, SignatureFormatError, parse_signature

from .fakepkg import make_package

HUGE = 10**400  # what json.loads makes of "1" and 400 zeros


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (HUGE, "an integer of 1329 bits, beyond float64"),
        (-HUGE, "beyond float64"),
        (10**5000, "beyond float64"),  # str() of it would itself raise: the message must not print it
        (float("inf"), "finite"),
        (float("nan"), "finite"),
        (True, "a boolean"),
        ("1.5", "the string '1.5'"),
        (None, "null"),
    ],
    ids=["401 digits", "-401 digits", "5001 digits", "inf", "nan", "bool", "string", "null"],
)
def test_finite_float_refuses_with_a_message(value: Any, said: str) -> None:
    with pytest.raises(NumberError, match=said):
        finite_float(value)


def test_finite_float_and_json_int_accept_what_a_writer_writes() -> None:
    assert finite_float(1) == 1.0 and finite_float(1e-5) == 1e-5 and finite_float(10**300) == 1e300
    assert json_int(-(2**63)) == -(2**63) and json_int(2**64 - 1) == 2**64 - 1
    for bad in (2**64, -(2**63) - 1, HUGE, 1.0, True, "3"):
        with pytest.raises(NumberError):
            json_int(bad)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (1.6, 'the JSON number 1.6: it must be a string like "1.6"'),
        (2, "the JSON number 2: it must be"),
        (HUGE, "the JSON number an integer of 1329 bits"),
        ("\u00b9.6", "not MAJOR.MINOR in ASCII digits"),  # isdigit() says yes, int() raises
        ("\u0661.\u0666", "not MAJOR.MINOR in ASCII digits"),  # int() reads Arabic-Indic digits: we do not
        ("1", "not MAJOR.MINOR"),
        (" 1.6", "not MAJOR.MINOR"),
        ("9999999.0", "not MAJOR.MINOR"),
        (["1", "6"], "a list"),
    ],
    ids=["float", "int", "401 digits", "superscript", "arabic-indic", "major only", "space", "7 digits", "list"],
)
def test_schema_version_is_two_ascii_numbers_in_a_string(value: Any, said: str) -> None:
    with pytest.raises(NumberError, match=said.replace("(", r"\(").replace(")", r"\)")):
        schema_version(value, "the manifest's schema_version", "1.6")
    assert schema_version("1.6", "x", "1.6") == (1, 6) and schema_version("10.12", "x", "1.6") == (10, 12)


def _report_dict(**changes: Any) -> dict[str, Any]:
    data = Report(kind="probe", package={}, phases=(make_phase("archive", 0.5, []),)).to_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (_report_dict(schema_version="\u00b9.1"), "ASCII digits"),
        (_report_dict(schema_version=1.1), 'must be a string like "1.1"'),
        (_report_dict(phases=[{"name": "archive", "status": "passed", "seconds": HUGE}]), "beyond float64"),
        (_report_dict(phases=[{"name": "archive", "status": "passed", "seconds": float("nan")}]), "finite"),
        (_report_dict(phases=[{"name": "archive", "status": "passed", "seconds": "0.5"}]), "expected a number"),
    ],
)
def test_a_report_read_back_refuses_bad_numbers_with_tool_error(data: dict[str, Any], said: str) -> None:
    with pytest.raises(ToolError, match=said):
        Report.from_dict(data)
    assert Report.from_dict(_report_dict()).phases[0].seconds == 0.5


@pytest.mark.parametrize("version", ["\u00b9.0", "\u0661.0", "1"])
def test_a_signature_schema_in_other_digits_is_a_format_error(version: str) -> None:
    raw = json.loads(SignatureEntry("ed25519", "k", "m", b"x" * 64).to_bytes())
    raw["schema_version"] = version
    with pytest.raises(SignatureFormatError, match=r"ASCII digits|MAJOR\.MINOR"):
        parse_signature(json.dumps(raw).encode())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("compute_capability", "\u00b9\u2070"),
        ("cuda_archs", ["80", "\u0669\u0660"]),
        ("kernel_archs", ["sm_\u00b9\u2070"]),
        ("kernels", [{"entry": "k.fatbin", "kind": "fatbin", "archs": ["ptx:sm_\u0669\u0660"]}]),
    ],
)
def test_gpu_archs_in_other_scripts_digits_are_manifest_findings(tmp_path: Path, field: str, value: Any) -> None:
    # the host rules read these with int() after isdigit(): "¹" passes the one and fails the other
    pkg = make_package(tmp_path / "m.pt2", edit=lambda m: m["target"].update({"device_type": "cuda", field: value}))
    archive, findings = open_archive(pkg)
    assert archive is not None and not findings
    with archive:
        problems = check_manifest(parse_manifest(archive.read(layout.MANIFEST, max_bytes=1 << 24)), archive)
    assert [p.code for p in problems] == ["manifest.invalid"] and "ASCII digits" in problems[0].message, problems
