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


def test_the_generated_wrapper_compiles_without_optimisation_or_line_tables() -> None:
    # the wrapper's run_impl only calls kernels: O0 and no line tables cut g++'s time (issue 41)
    assert os.environ.get("AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL") is not None
    assert os.environ.get("AOT_INDUCTOR_ENABLE_LINE_TABLES") is not None


def test_inductor_reads_the_wrapper_settings_from_the_environment() -> None:
    """The two names are torch's own: a child's Inductor config takes them (a renamed variable would
    silently stop saving anything)."""
    import subprocess
    import sys

    code = (
        "from torch._inductor import config; print(config.aot_inductor.compile_wrapper_opt_level, config.aot_inductor.enable_line_tables)"
    )
    env = {**os.environ, "AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL": "O0", "AOT_INDUCTOR_ENABLE_LINE_TABLES": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120).stdout.split()
    assert out == ["O0", "False"]


def test_a_process_the_tests_start_gets_ctrl_c_even_when_the_suite_was_started_with_it_ignored() -> None:
    """Started in the background by a shell without job control, the suite inherits SIGINT
    ignored, and so would every build it interrupts (test_interrupt_phase.py failed that way):
    tests/conftest.py gives this process Python's handler, and exec gives its children the default."""
    import signal
    import subprocess
    import sys

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split() == ["True"]
