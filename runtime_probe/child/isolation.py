"""How every child interpreter the tools start is shielded from the caller's working directory.

``python -m MODULE`` puts the working directory first on ``sys.path``, and a relative or empty
``PYTHONPATH`` entry resolves against it: a ``torch.py`` or ``runtime_probe.py`` in the folder the
user runs the probe from would run inside the child, and its failure would be blamed on the
package's native code. So a child is started as ``python -P -X faulthandler -m MODULE`` (``-P``:
nothing unsafe is prepended to ``sys.path``, Python 3.11+, runtime_probe's own floor) with a
``PYTHONPATH`` that holds absolute folders only: this very copy of runtime_probe (and aoti_guard)
first, then the caller's absolute entries, kept (a container that puts torch on ``PYTHONPATH``
must still find it). ``-I`` would be stricter, but it also drops every ``PYTHON*`` variable and
the user's site-packages, where torch may live.

Used by ``child.worker`` (the probe, the build's validation, the ladder's reruns),
``aoti_guard._proc`` (the twin's compile, ONNX Runtime, the minifier) and, in its own copy,
``aoti_guard/container/boot.py`` (which may import nothing).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

__all__ = ["ISOLATION_FLAGS", "PACKAGE_PARENT", "child_environment", "isolated_pythonpath", "python_argv"]

# the folder that holds runtime_probe/ (and aoti_guard/ in a checkout or an install)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# flags every child interpreter gets: -P keeps the working directory off sys.path
ISOLATION_FLAGS = ("-P",)


def python_argv(module: str, *args: str, python: str | None = None) -> list[str]:
    """``python -P -X faulthandler -m MODULE ARGS`` (this interpreter unless ``python`` is given)."""
    return [python or sys.executable, *ISOLATION_FLAGS, "-X", "faulthandler", "-m", module, *args]


def isolated_pythonpath(value: str | None, first: Sequence[str] = (PACKAGE_PARENT,)) -> str:
    """``first``, then the absolute entries of ``value``: an empty entry means the working
    directory and a relative one resolves against it, so both are dropped."""
    entries = [*first, *(value or "").split(os.pathsep)]
    return os.pathsep.join(dict.fromkeys(p for p in entries if p and os.path.isabs(p)))


def child_environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment with ``env`` applied (None unsets a variable), unbuffered, and
    with this very checkout first on an absolute-only PYTHONPATH, so a child imports the same
    runtime_probe and aoti_guard also when they run from a source tree."""
    child_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = value
    child_env["PYTHONPATH"] = isolated_pythonpath(child_env.get("PYTHONPATH"))
    child_env["PYTHONUNBUFFERED"] = "1"
    return child_env
