"""The user's modules that register a package's custom ops, imported before the package loads.

A ``torch.library.custom_op`` (or ``triton_op``) exists only in a process that imported the module
defining it: AOTI's package calls it through the dispatcher, and a process that never imported it
fails to load the package with torch's ``Could not find schema for ns::op`` (issue 43). The build
hands its TARGET's module to each child that loads the program or the package; the probe takes
``--import MODULE_OR_FILE``; the guarded loader names the remedy.

Importing runs the module's code. Only a module the user named is ever imported here (the build's
TARGET, the probe's ``--import``); never a name read from a package.

A spec is a Python file (it ends in ``.py`` or holds a path separator) or a dotted module name: the
same rule as the build's TARGET (aoti_guard/builder/resolve/target.py imports through here). The
children get the specs in ``IMPORT_ENV`` (a JSON list), and each child imports them before it loads
anything (``import_from_env``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType

__all__ = ["IMPORT_ENV", "IMPORT_FAILED", "child_env", "import_from_env", "import_module", "is_file", "missing_op", "specs_from_env"]

IMPORT_ENV = "RUNTIME_PROBE_IMPORT"
# what a child's ImportError says when a module the user named (--import, the build's TARGET) failed
# to import: the child writes it (child/ops.py), the failure table reads it (child/failures.py)
IMPORT_FAILED = "(the modules given to register user ops) raised"

# torch's text when a package names an op this process has not registered (torch 2.11-2.15)
_MISSING_SCHEMA = re.compile(r"Could not find schema for ([A-Za-z_][\w.]*::[A-Za-z_][\w.]*)")


def is_file(spec: str) -> bool:
    """Whether ``spec`` names a Python file (else a dotted module name)."""
    return spec.endswith(".py") or os.sep in spec


def import_module(spec: str) -> ModuleType:
    """Import ``spec`` (a ``.py`` file or a dotted module name) and return the module.

    A file is imported as ``_aoti_guard_target_<stem>`` with its folder first on ``sys.path`` (its
    own imports of its neighbours work); a name already imported is returned as it is.

    Raises:
        FileNotFoundError: ``spec`` names a file that does not exist.
        ImportError: the file cannot be imported as a module; whatever the module raises on import.
    """
    if not is_file(spec):
        return importlib.import_module(spec)
    path = os.path.abspath(spec)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {spec}")
    name = "_aoti_guard_target_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    loaded = sys.modules.get(name)
    if loaded is not None and os.path.abspath(getattr(loaded, "__file__", "") or "") == path:
        return loaded  # imported already (a child asked twice): registering its ops again would raise
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot import {spec}: not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(path))
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def child_env(specs: Sequence[str]) -> dict[str, str]:
    """The environment entry that makes a child import ``specs`` first (empty for none). Files are
    made absolute: a child may run in another working directory."""
    if not specs:
        return {}
    return {IMPORT_ENV: json.dumps([os.path.abspath(s) if is_file(s) else s for s in specs])}


def specs_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """The specs ``child_env`` wrote (none when the variable is unset or not a list of strings)."""
    raw = (os.environ if environ is None else environ).get(IMPORT_ENV)
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [s for s in value if isinstance(s, str)] if isinstance(value, list) else []


def import_from_env() -> list[str]:
    """Import every spec of ``IMPORT_ENV``, in order; returns them. Raises what ``import_module`` raises."""
    specs = specs_from_env()
    for spec in specs:
        import_module(spec)
    return specs


def missing_op(text: str) -> str | None:
    """The op (``ns::name``) torch could not find a schema for in ``text``, else None."""
    found = _MISSING_SCHEMA.search(text)
    return found.group(1).rstrip(".") if found else None
