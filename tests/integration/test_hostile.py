"""The hostile-input corpus against the real probe CLI: every case is a finding, never a crash.

The corpus is generated from the session's real package (tests/hostile/make_corpus.py); each case
runs as ``python -m runtime_probe`` with a time limit, from a fresh interpreter so that its peak
memory is its own. The guarded loader and ``inspect`` get the same files in-process.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runtime_probe import load
from runtime_probe.inspect import inspect_package
from runtime_probe.reporting.errors import PackageRejected
from tests.hostile.attack import all_attacks
from tests.hostile.corpus_calls import CALLS
from tests.hostile.make_corpus import Case, Keys, make_corpus, make_keys
from tests.hostile.runner import Outcome, run_isolated

from .conftest import Built

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
ARCHIVE_CASE_SECONDS = 30.0  # most take under a second; the bound is for a loaded CI machine
CHILD_CASE_SECONDS = 60.0
ARCHIVE_CASE_RSS = 256 * 1024**2  # no torch: the probe alone
CHILD_CASE_RSS = 1536 * 1024**2  # with the torch child that loaded the package


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def corpus(static_pkg: Built, keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    return make_corpus(static_pkg.path, tmp_path_factory.mktemp("corpus"), keys)


@pytest.fixture(scope="module")
def outcomes(corpus: list[Case]) -> list[Outcome]:
    return run_isolated(corpus, workers=2, timeout=CHILD_CASE_SECONDS + 30)


def test_corpus_covers_every_group_the_issue_names(corpus: list[Case]) -> None:
    groups = {c.group for c in corpus}
    assert groups == {
        "truncated",
        "flipped byte",
        "unsafe name",
        "zip structure",
        "zip bomb",
        "manifest",
        "signature",
        "weights",
        "command line",
    }
    names = {c.name for c in corpus}
    for needed in ("name-dotdot", "name-absolute", "name-symlink", "name-duplicate", "name-second-root", "zip-bomb-deflate"):
        assert needed in names
    for needed in ("manifest-not-json", "manifest-shape-strings", "manifest-over-size-cap", "manifest-deep-nesting-json"):
        assert needed in names
    for needed in ("manifest-schema-99", "manifest-nan-tolerance", "weights-truncated-data", "weights-header-length-lies"):
        assert needed in names
    for needed in (
        "cli-json-over-package",
        "cli-junit-over-package",
        "cli-fifo-as-public-key",
        "cli-name-ansi-clear",
        "cli-hashes-150k-missing",
        "cli-save-inputs-over-inputs",  # issue 25: the one path rule
        "cli-junit-and-log-file-one-file",
        "cli-parse-error-junit-over-inputs",
    ):
        assert needed in names
    assert len(names) == len(corpus) >= 120


def test_every_case_gives_its_exit_code_and_finding_and_loses_no_file(outcomes: list[Outcome]) -> None:
    bad = [o.problem() for o in outcomes if not o.ok]
    assert not bad, "\n\n".join(bad)
    assert not [o.case.name for o in outcomes if o.crashed]


def test_every_case_is_bounded_in_time_and_memory(outcomes: list[Outcome]) -> None:
    over = []
    for o in outcomes:
        seconds, rss = (CHILD_CASE_SECONDS, CHILD_CASE_RSS) if o.case.needs_child else (ARCHIVE_CASE_SECONDS, ARCHIVE_CASE_RSS)
        if o.seconds > seconds or o.max_rss > rss:
            over.append(f"{o.case.name}: {o.seconds:.1f}s, {o.max_rss / 2**20:.0f} MiB")
    assert not over, over


def test_nothing_native_runs_for_archive_cases(outcomes: list[Outcome]) -> None:
    """Every case but the weights ones must stop in the archive phase: the probe never started
    the child that would open the package's native code."""
    for o in outcomes:
        if not o.case.needs_child:
            assert not any(code.startswith(("load.", "run.", "env.", "constants.")) for code in o.codes), o.case.name


def test_guarded_loader_and_inspect_refuse_the_same_files(corpus: list[Case], keys: Keys) -> None:
    for case in corpus:
        if case.needs_child or case.exit_code != 1:  # exit 2: the command line was refused, not the package
            continue
        key = case.args[1] if case.args[:1] == ("--public-key",) else None
        with pytest.raises(PackageRejected) as info:
            load(case.path, public_key=key)
        refused = {f.code for f in info.value.findings if f.severity.value == "error"}
        # the probe's finding, or (a case without a manifest) refused for that before any read
        assert refused & case.expect or refused == {"manifest.missing"}, (case.name, refused, case.expect)
        data = inspect_package(str(case.path))  # never raises; problems are data
        assert isinstance(data["problems"], list), case.name


def test_reliability_doc_lists_exactly_this_corpus(corpus: list[Case]) -> None:
    """docs/reliability.md is generated (python -m tests.hostile.report); a case added here and
    not there means the doc was not regenerated."""
    text = DOC.read_text()
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.M))
    names = {c.name for c in corpus} | {c.name for c in CALLS} | {a.name for a in all_attacks()}
    assert listed == names, sorted(listed ^ names)
    assert "probe crashes: 0" in text
    assert "serving-process crashes: 0" in text and "wrong results accepted: 0" in text
