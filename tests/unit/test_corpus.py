"""The hostile corpus, generated from a torch-free package, through the probe in-process.

Every case must stop in the archive phase with its expected finding, so no child is ever started
here; tests/integration/test_hostile.py runs the same generator on a real package through the
CLI, with time and memory bounds.
"""

from __future__ import annotations

import pytest

from runtime_probe.inspect import inspect_package, render_inspection
from runtime_probe.probe.run import ProbeOptions, probe
from tests.hostile.make_corpus import Case, make_corpus, make_keys

from .fakepkg import make_package

# the corpus signs some of its cases: keys come from the [signing] extra (always installed in CI)
pytest.importorskip("cryptography", reason="the corpus's signed cases need the cryptography package ([signing] extra)")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    folder = tmp_path_factory.mktemp("corpus")
    source = make_package(folder / "fake.pt2")
    # exit 2: a refused command line, which only the CLI sees (test_cli_reports.py, and the runner)
    return [c for c in make_corpus(source, folder / "cases", make_keys(folder / "keys")) if not c.needs_child and c.exit_code == 1]


def test_the_generator_makes_every_group(corpus: list[Case]) -> None:
    groups = {"truncated", "flipped byte", "unsafe name", "zip structure", "zip bomb", "manifest", "signature", "command line"}
    assert {c.group for c in corpus} == groups
    assert len(corpus) >= 100


def test_every_case_stops_in_the_archive_phase_with_its_finding(corpus: list[Case]) -> None:
    wrong = []
    for case in corpus:
        key = case.args[1] if case.args[:1] == ("--public-key",) else None
        report = probe(case.path, ProbeOptions(public_key=key))
        codes = {f.code for f in report.findings if f.severity.value == "error"}
        statuses = {p.name: p.status for p in report.phases}
        if report.exit_code != 1 or not case.expect & codes or statuses["host"] != "skipped":
            wrong.append(f"{case.name}: exit {report.exit_code}, {sorted(codes)}, expected one of {sorted(case.expect)}")
    assert not wrong, "\n".join(wrong)


def test_inspect_reports_problems_and_never_raises(corpus: list[Case]) -> None:
    for case in corpus:
        data = inspect_package(str(case.path))
        assert isinstance(render_inspection(data), str), case.name
        # inspect reads no entry bodies: it sees what the zip and the manifest say, not hashes or CRCs
        if case.group in ("truncated", "unsafe name") or (case.group == "manifest" and "archive.hash_mismatch" not in case.expect):
            assert data["problems"], case.name
