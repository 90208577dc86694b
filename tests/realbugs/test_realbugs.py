"""One test per case of the public-record corpus (cases.py): aoti-guard does what the case asks.

The bare side is measured for docs/realbugs.md and asserted only where it is the point of the case
(``Case.bare``: "bare returns wrong values" must really be wrong, or the case is mis-described).
A case of a class being fixed now (issue 42) or of a new gap is a strict xfail: it starts to XPASS,
and so to fail, the moment the fix lands, and the mark is removed then.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import shared_dir

from .cases import Case
from .corpus import CASES
from .report import rows
from .runner import run_case
from .verdict import meets

pytestmark = [pytest.mark.integration, pytest.mark.realbugs]


def _param(case: Case) -> object:
    marks = []
    if case.gpu:
        marks.append(pytest.mark.gpu)
    if case.in_progress:
        marks.append(pytest.mark.xfail(strict=True, reason=f"issue 42: {case.klass} in progress"))
    elif case.gap:
        marks.append(pytest.mark.xfail(strict=True, reason=f"issue 42: new gap: {case.gap}"))
    return pytest.param(case, id=case.name, marks=marks)


@pytest.fixture(scope="session")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The integration tests' package folder: the packages both suites build are built once.
    ``AOTI_GUARD_REALBUGS_PACKAGES=DIR``: a folder kept between runs (``report.py --folder``'s),
    where a package built before is used as it is."""
    kept = os.environ.get("AOTI_GUARD_REALBUGS_PACKAGES")
    return Path(kept) if kept else shared_dir(tmp_path_factory, "packages")


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case: Case, packages: Path) -> None:
    outcome = run_case(case, packages)
    kept = os.environ.get("AOTI_GUARD_REALBUGS_OUTCOMES")  # a folder: docs/realbugs.md rendered from this very run
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        Path(kept, f"{case.name}.json").write_text(json.dumps(rows([outcome])))
    if outcome.bare.result == "skipped":
        pytest.skip(outcome.bare.detail)
    if case.bare is not None:
        assert outcome.bare.result == case.bare, f"the case says bare AOTI gives '{case.bare}'; measured: {outcome.bare}"
    met, seen = meets(outcome)
    assert met, f"{case.report} ({case.name}): aoti-guard must {case.expect.stage} {case.expect.codes or ''}; {seen}"
