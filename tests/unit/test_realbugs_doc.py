"""docs/realbugs.md lists every case of the public-record corpus (tests/realbugs/cases.py).

The table itself is measured (``python -m tests.realbugs.report``), so it is not compared byte for
byte: a case added to the corpus without regenerating the table fails here, as does a row whose
case was removed."""

from __future__ import annotations

import re
from pathlib import Path

from tests.realbugs.cases import CLASSES
from tests.realbugs.corpus import CASES, PACKAGES, distinct_reports

DOC = Path(__file__).resolve().parents[2] / "docs" / "realbugs.md"


def test_the_table_lists_every_case_and_no_other() -> None:
    text = DOC.read_text()
    listed = set(re.findall(r"\(`([a-z0-9_]+)`\) \|", text))
    names = {c.name for c in CASES}
    assert names - listed == set(), f"cases missing from docs/realbugs.md (run python -m tests.realbugs.report): {sorted(names - listed)}"
    assert listed - names == set(), f"rows in docs/realbugs.md for no case: {sorted(listed - names)}"


def test_the_corpus_is_as_large_as_issue_42_asks() -> None:
    assert len(CASES) >= 40
    assert len(distinct_reports()) >= 30


def test_every_case_names_a_known_class_package_and_report() -> None:
    for case in CASES:
        assert case.klass in CLASSES, case.name
        assert case.package in PACKAGES, case.name
        assert re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", case.report), case.report
        assert case.expect.stage in ("build", "warn", "probe", "serve", "runs", "cannot"), case.name
        assert case.expect.stage != "cannot" or case.expect.why, f"{case.name}: a case aoti-guard cannot catch says why"
    assert len({c.name for c in CASES}) == len(CASES)
