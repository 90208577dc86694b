"""Under CI (CI=1) a skipped test fails: `.ci/run` installs everything the tests need (extras, gdb,
a Docker engine, the test images), so a skip there would hide a check that silently stopped
running. On a developer's machine skips stay skips, with their reason."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _fail_skip(report: Any) -> None:
    if _under_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where nothing may be: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _fail_skip(outcome.get_result())  # a module-level skip (importorskip of a missing extra)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist's ``--dist loadscope`` (scripts/test.sh) a module's tests run on one
    worker, so a module-scoped fixture (often a real build) is made once; four exceptions:
    the container tests share one worker (one Docker engine: test_no_probe_container_is_left_behind
    looks at every container), and each zoo model and each public-record case (tests/realbugs) is
    a unit of its own (they spread over the workers). Session packages are shared between workers by tests/integration/conftest.py::once.
    (``--dist loadgroup`` with ``xdist_group`` marks did not group under pytest 9.2 + xdist 3.8.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scopes(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith("tests/containers/"):
                return "tests/containers"
            if nodeid.startswith("tests/zoo/test_zoo_parity.py::test_builds_probes_and_guard_loads["):
                return nodeid
            if nodeid.startswith("tests/realbugs/test_realbugs.py::test_case["):
                return nodeid  # one module, 40 cases: spread over the workers (packages: once)
            return str(super()._split_scope(nodeid))

    return Scopes(config, log)


# The quick tier (``scripts/test.sh --quick``, ``-m quick``): every unit test, and the integration
# modules whose tests use only these session packages (tests/integration/conftest.py), each built
# once per run, and build nothing of their own. No zoo, docker, slurm or GPU test is in it. A
# module here that asks for another package fails the collection (see _mark_quick): move it out of
# the list, or make it use one of these. Left out although they use only the static package:
# test_hostile.py (its corpus takes ~160 s to make) and test_faults.py (~3 minutes of children
# killed on purpose); both run in the full command.
QUICK_PACKAGES = frozenset({"static_pkg", "plain_pkg", "example_pkg", "mixed_pkg"})
QUICK_INTEGRATION = frozenset(
    {
        "test_compiled_model.py",
        "test_guard.py",
        "test_latency_cli.py",
        "test_load_errors.py",
        "test_preflight.py",
        "test_reports.py",
        "test_signature_interop.py",
        "test_skipped_phases.py",
        "test_toctou.py",
        "test_verify_only.py",
        "test_worker.py",
    }
)
_TESTS = Path(__file__).resolve().parent


def _mark_quick(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if path.parent == _TESTS / "unit":
            item.add_marker(pytest.mark.quick)
        elif path.parent == _TESTS / "integration" and path.name in QUICK_INTEGRATION:
            others = sorted(f for f in getattr(item, "fixturenames", ()) if f.endswith("_pkg") and f not in QUICK_PACKAGES)
            if others:
                raise pytest.UsageError(
                    f"{item.nodeid} is in the quick tier (tests/conftest.py QUICK_INTEGRATION) but uses {', '.join(others)}; "
                    f"the quick tier builds only {', '.join(sorted(QUICK_PACKAGES))}: take the module out of the list or use one of those"
                )
            item.add_marker(pytest.mark.quick)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The quick tier's marks (``_mark_quick``); known failures of a torch release
    (tests/known_failures.py) become strict xfails there."""
    _mark_quick(items)
    try:
        import torch
    except ImportError:
        return
    from tests.known_failures import KNOWN, NOT_YET_ESTABLISHED

    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    known = KNOWN.get((major, minor), {})
    for item in items:
        why = known.get(item.nodeid)
        if why is not None:
            strict = NOT_YET_ESTABLISHED not in why
            item.add_marker(pytest.mark.xfail(reason=f"known on torch {major}.{minor}: {why}", strict=strict))


@pytest.fixture(autouse=True)
def _working_directory_unchanged() -> Iterator[None]:
    """A test that leaves the working directory elsewhere fails, and the directory is put back.
    Two tests did (``os.chdir(tmp_path)``): every later test on that xdist worker ran
    ``python -m aoti_guard`` from a deleted temporary folder, and a factory importing the repo's
    ``zoo`` failed there (``ModuleNotFoundError``) but passed alone. Use ``monkeypatch.chdir``."""
    before = os.getcwd()
    yield
    after = os.getcwd()
    if after != before:
        os.chdir(before)
        pytest.fail(f"the test left the working directory at {after} (it was {before}): use monkeypatch.chdir", pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    """Run under ``nohup``, the suite and every process it starts would inherit SIGHUP ignored;
    started in the background by a shell without job control (``(bash .ci/run &)``, a script's
    ``cmd &``), SIGINT ignored, and Python then installs no Ctrl-C handler. aoti-guard rightly
    leaves an ignored signal ignored (runtime_probe/runtime/terminate.py): the tests that send
    SIGHUP or SIGINT to a build or a probe would wait for nothing (a fresh-clone CI run started
    that way failed test_interrupt_phase.py, 2026-11-27). They test the default disposition,
    which a terminal gives; so does this, for this process and, through exec, its children."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _inductor_settings_for_the_tests()


def _inductor_settings_for_the_tests() -> None:
    """Inductor settings for every process the tests start (builds, probes, their children), each
    only where the caller has not set it. None changes what a package computes (issue 27, issue
    41; docs/benchmarks.md "The test suite's time"):

    - ``TORCHINDUCTOR_VEC_ISA_OK=1``: Inductor trusts the CPU's flags for the base vector ISAs
      instead of test-compiling a program per ISA and dlopen-ing it in a ``python -c`` child, in
      every process that compiles (20 such children per default build of the example, 12 with
      it; 12 % less CPU per build, measured A/B). On the CI machine kind both give the same ISA
      list, and the ISA aoti-guard builds for is its own choice (``--cpu-isa``), not this list.
    - ``TORCHINDUCTOR_CACHE_DIR`` pinned to torch's default (torch's own ``default_cache_dir``, read
      now): a test that gives a build its own TMPDIR would otherwise give it a cold cache
      (Inductor puts its cache under TMPDIR).
    - ``AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL=O0`` and ``AOT_INDUCTOR_ENABLE_LINE_TABLES=0``: the
      generated wrapper's ``run_impl`` (the calls between kernels, not the kernels) compiled
      without optimisation or line tables: g++ on wrapper.cpp is most of a small model's compile;
      ~6 % less CPU per build of the static model (median of 5 A/B, docs/benchmarks.md).
      Release builds keep torch's defaults; no test measures the wrapper's own speed.
    """
    os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
    os.environ.setdefault("AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL", "O0")
    os.environ.setdefault("AOT_INDUCTOR_ENABLE_LINE_TABLES", "0")
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())


ENGINES_PENDING = "AOTI_GUARD_ENGINES_PENDING"
ENGINES_WAIT_S = 1200.0


def wait_for_engines() -> None:
    """Under ``.ci/run`` the Docker engine, the local images and the Slurm cluster are made in the
    background while the 2.13 lane runs (debootstrap and downloads: mostly the network and the
    disk, ~4 min on a fresh machine). ``AOTI_GUARD_ENGINES_PENDING=FILE`` names the file the
    background job writes when it ends; a test that needs them calls this first and waits for it
    (its log is beside it). Unset: nothing to wait for."""
    marker = os.environ.get(ENGINES_PENDING)
    if not marker:
        return
    deadline = time.monotonic() + ENGINES_WAIT_S
    while not Path(marker).exists():
        if time.monotonic() > deadline:
            pytest.fail(
                f"the Docker engine, images and Slurm cluster were not ready after {ENGINES_WAIT_S:.0f} s ({marker} absent)", pytrace=False
            )
        time.sleep(2.0)


def shared_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder every xdist worker of this run sees (the run's base temp; the session's own
    without xdist)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / name
    folder.mkdir(exist_ok=True)
    return folder


CXX_MEMO = Path(__file__).parent / "tools" / "cxx_memo" / "g++"


@pytest.fixture(scope="session", autouse=True)
def _cxx_memo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every process the tests start compiles through tests/tools/cxx_memo/g++: the real compiler
    (``CXX`` where the caller set one, else g++), except that a compile of a generated source this
    run has compiled before, with the same flags, gets the object made then. The suite builds the
    same small models for many tests of what a build does around its compile; 31 of a lane's 84
    wrapper compiles were repeats (docs/benchmarks.md, issue 27). The memo is in the run's
    temporary folder, shared by the xdist workers, gone with it. ``AOTI_GUARD_TEST_CXX_MEMO=0``
    turns it off."""
    if os.environ.get("AOTI_GUARD_TEST_CXX_MEMO", "1") == "0" or os.environ.get("CXX") == str(CXX_MEMO):
        yield
        return
    saved = {k: os.environ.get(k) for k in ("CXX", "AOTI_GUARD_TEST_REAL_CXX", "AOTI_GUARD_TEST_CXX_MEMO_DIR")}
    os.environ["AOTI_GUARD_TEST_REAL_CXX"] = os.environ.get("CXX") or "g++"
    os.environ["AOTI_GUARD_TEST_CXX_MEMO_DIR"] = str(shared_dir(tmp_path_factory, "cxx-memo"))
    os.environ["CXX"] = str(CXX_MEMO)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
