"""The test run's compile memo (tests/tools/cxx_memo/g++, issue 27): a part of the suite run by
pytest as the lane runs it (2 xdist workers, ``--dist loadscope``), with the memo and without it
(``AOTI_GUARD_TEST_CXX_MEMO=0``), interleaved, side by side: wall seconds and the CPU seconds of
pytest and everything it started.

    python -m bench.suite_compile_memo [--rounds 2] [TEST_PATH ...]

The default part is the modules that build the same small model to test what a build does around
its compile (signing, markdown, ``--key``, targets, diagnosis, interrupts, limits, write paths,
child isolation, signals). Each run has its own pytest temp folder, so its memo starts empty, as
in CI. Each arm's first run also makes Inductor's precompiled headers for its compiler command
(the memo is another compiler path); the order rotates from round to round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable

from bench._common import ROOT, Sample, interleave, run_timed, side_by_side

DEFAULT = [
    "tests/integration/test_build_targets.py",
    "tests/integration/test_markdown.py",
    "tests/integration/test_signing.py",
    "tests/integration/test_key_grammar.py",
    "tests/integration/test_build_diagnosis.py",
    "tests/integration/test_write_paths.py",
    "tests/integration/test_interrupt_phase.py",
    "tests/integration/test_resource_limits.py",
    "tests/integration/test_child_isolation.py",
    "tests/integration/test_signals.py",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.suite_compile_memo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("paths", nargs="*", default=DEFAULT, help="test files or node ids (default: ten build-heavy modules)")
    ns = parser.parse_args(argv)

    def arm(memo: bool) -> Callable[[], Sample]:
        def run() -> Sample:
            with tempfile.TemporaryDirectory(prefix="aoti-guard-bench-memo-") as base:
                cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadscope", "-p", "no:cacheprovider", "--basetemp", base]
                return run_timed([*cmd, *ns.paths], env={"AOTI_GUARD_TEST_CXX_MEMO": "1" if memo else "0"}, cwd=ROOT)

        return run

    results = interleave([("without the memo", arm(False)), ("with the memo", arm(True))], ns.rounds, warmup=0)
    print(side_by_side(f"pytest of {len(ns.paths)} path(s), 2 workers, wall seconds, {ns.rounds} round(s):", results))
    cpu = {label: statistics.median(s.own_cpu_s for s in samples) for label, samples in results.items()}
    print("  CPU seconds (pytest and every process it started), medians:")
    for label, samples in results.items():
        print(f"  {label:<18} {cpu[label]:8.1f}   {', '.join(f'{s.own_cpu_s:.1f}' for s in samples)}")
    print(f"  with / without     {cpu['with the memo'] / cpu['without the memo']:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
