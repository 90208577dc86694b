"""The child side of child.Worker: read JSON requests, run them, answer with JSON.

Started as ``python -P -X faulthandler -m runtime_probe.child.main CMD_FD RESULT_FD``. Imports only the
standard library until a request needs torch, so the parent can start it early and let the torch
import overlap with other work.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, NoReturn


def _unbuffer_c_stdout() -> None:
    """Make C's stdout unbuffered: AOTI's kernel printer uses printf, and a crash would otherwise
    lose the last lines, which name the kernel that was running."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        stdout_ptr = ctypes.c_void_p.in_dll(libc, "stdout")
        libc.setvbuf(stdout_ptr, None, 2, 0)  # 2 = _IONBF
    except (OSError, ValueError, AttributeError):
        pass


def _die_with_parent() -> None:
    """Ask the kernel to SIGKILL this child when the thread that started it dies: the child runs
    in a session of its own (so a timeout can kill its group), so a signal that kills the probe
    would otherwise leave it running, holding the package and its extracted files."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        return
    expected = os.environ.get("RUNTIME_PROBE_PARENT_PID")
    if expected and os.getppid() != int(expected):  # the parent died before prctl: nobody is left to answer
        os._exit(1)


def _fast_exit(state: Any) -> NoReturn:
    """Exit without the interpreter's teardown of every module: with torch and its exporter
    imported that teardown takes ~0.7 s, and the parent waits for it. What matters still runs:
    the loaded models' destructors (AOTI removes the folder it extracted the package to), the
    atexit handlers, and the flush of stdout and stderr."""
    import atexit
    import gc

    state.models.clear()
    state.tensor_files.clear()
    gc.collect()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str]) -> int:
    cmd_fd, res_fd = int(argv[1]), int(argv[2])
    _die_with_parent()
    _unbuffer_c_stdout()
    from runtime_probe.child import ops as _ops
    from runtime_probe.runtime import user_modules

    state = _ops.State()
    # the modules that register the package's user ops (probe --import, the build's TARGET): each
    # request fails with the import's own error until they imported, so none loads without them
    imported = _ops.ImportOnce(user_modules.specs_from_env())
    with os.fdopen(cmd_fd, "r", encoding="utf-8") as requests, os.fdopen(res_fd, "w", encoding="utf-8") as replies:
        for line in requests:
            request = json.loads(line)
            op = request.get("op")
            if op == "exit":
                if request.get("args", {}).get("fast"):
                    _fast_exit(state)
                break
            reply: dict[str, Any]
            try:
                handler = _ops.OPS[op]
                if op not in ("facts", "ping"):  # the host's facts come first, whatever the user's module does
                    imported.ensure(state)
                reply = {"ok": True, "result": handler(state, **request.get("args", {}))}
            except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent as data
                reply = {
                    "ok": False,
                    "error": {"type": type(exc).__name__, "message": str(exc)[-8000:], "traceback": traceback.format_exc()[-12000:]},
                }
            sys.stdout.flush()
            replies.write(json.dumps(reply) + "\n")
            replies.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
