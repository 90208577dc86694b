"""The ``aoti-guard`` command ends without the interpreter's teardown (``cli.run`` / ``exit_now``).

After a build the teardown of torch's modules took seconds the user waits for nothing; the exit
must still keep the exit code, what was printed, and what the atexit handlers do (logging's
--log-file flush, Inductor's compile-worker shutdown)."""

from __future__ import annotations

import os
import subprocess
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = """
import atexit, sys
from aoti_guard.cli import exit_now

class Teardown:
    def __del__(self):
        print("torn down", flush=True)

keep = Teardown()  # a module global: only the interpreter's teardown deletes it
atexit.register(lambda: print("atexit ran"))  # buffered: exit_now must flush it after the handlers
sys.stdout.write("unflushed output")  # no newline, no flush
exit_now(5)
"""


def _run(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=_REPO)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=_REPO, timeout=120, **kw)  # type: ignore[call-overload, no-any-return]


def test_exit_now_keeps_code_output_and_atexit_but_skips_teardown() -> None:
    proc = _run(["-c", _SCRIPT])
    assert proc.returncode == 5
    assert proc.stdout.startswith("unflushed output")
    assert "atexit ran" in proc.stdout
    assert "torn down" not in proc.stdout  # without exit_now, the teardown prints it


def test_the_same_script_torn_down_normally_prints_it() -> None:
    """The control: the marker object does print at an ordinary exit, so the test above can fail."""
    proc = _run(["-c", _SCRIPT.replace("exit_now(5)", "sys.exit(5)")])
    assert proc.returncode == 5
    assert "torn down" in proc.stdout


def test_python_m_aoti_guard_keeps_exit_codes_and_messages() -> None:
    usage = _run(["-m", "aoti_guard", "build", "-o", "not-a-package.txt"])
    assert usage.returncode == 2
    assert "does not end in .pt2" in usage.stderr
    ok = _run(["-m", "aoti_guard", "--help"])
    assert ok.returncode == 0
    assert "build" in ok.stdout


def test_the_console_script_is_run() -> None:
    """pyproject's ``aoti-guard`` entry point is ``run`` (the fast exit), not ``main``."""
    with open(os.path.join(_REPO, "pyproject.toml")) as f:
        assert 'aoti-guard = "aoti_guard.cli:run"' in f.read()
