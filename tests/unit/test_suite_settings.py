"""The suite's own settings (tests/conftest.py) are in force: a second ``pytest_configure`` in a
conftest silently replaces the first, and did once."""

from __future__ import annotations

import os


def test_inductor_trusts_the_cpu_flags_in_every_process_the_tests_start() -> None:
    # setdefault: a caller's own value wins, but there is always one (children inherit os.environ)
    assert os.environ.get("TORCHINDUCTOR_VEC_ISA_OK") is not None


def test_inductors_cache_does_not_follow_a_tests_tmpdir() -> None:
    # pinned when the suite starts, so a test that sets TMPDIR for a build does not move it
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    assert cache is not None and os.path.isabs(cache)
