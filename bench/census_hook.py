"""Loaded into every Python process of a census run (bench/lane_census.py puts a .pth that runs this
file into the lane's venv for the run, and takes it out after): at exit each process appends one
JSON line to ``$AOTI_GUARD_CENSUS_DIR/procs.jsonl``: its argv, its own CPU seconds, the CPU it had
used when this file ran (the interpreter's start-up), and the CPU its imports took: each import not
nested inside another (so nothing is counted twice), lazy ones during the work included, summed
under its name for the ``WATCHED`` modules and under ``other:PACKAGE`` for the rest.

``os._exit`` is wrapped too (the probe's children and the CLI leave by it); a process killed by a
signal writes nothing. Standard library only, and nothing here runs unless that variable is set.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

# the imports every process of the suite may pay before it does its work: torch itself, then what a
# compiling process adds (Inductor's compiler and code cache, sympy); bench/lane_census.py measures
# each alone too
WATCHED = ("torch", "torch._inductor.compile_fx", "torch._inductor.codecache", "sympy")


class _ImportTimer:
    """A meta-path finder that finds nothing itself: for a module imported outside any other import
    it asks the finders after it, and wraps the loader's ``exec_module`` to time the import (CPU s)."""

    def __init__(self, record: dict[str, float]) -> None:
        self.record = record
        self.depth = 0
        self.searching = False

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        # a finder asked below may search sys.meta_path itself (an editable install's does): not again
        if self.depth or self.searching:
            return None
        self.searching = True
        try:
            spec = self._find(name, path, target)
        finally:
            self.searching = False
        if spec is None:
            return None
        loader = spec.loader
        # built-in and frozen modules have their importer class as the loader: left alone (and cheap)
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return None
        real: Callable[[ModuleType], None] = loader.exec_module
        key = name if name in WATCHED else "other:" + name.partition(".")[0]

        def timed(module: ModuleType) -> None:
            if self.depth:  # a loader shared between modules, reached again inside another import
                real(module)
                return
            self.depth += 1
            started = time.process_time()
            try:
                real(module)
            finally:
                self.depth -= 1
                self.record[key] = self.record.get(key, 0.0) + time.process_time() - started

        try:
            loader.exec_module = timed  # type: ignore[method-assign]
        except (AttributeError, TypeError):
            return None
        return spec

    def _find(self, name: str, path: Sequence[str] | None, target: ModuleType | None) -> Any:
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    return spec
        return None


def install(out_dir: str) -> None:
    startup = time.process_time()
    imports: dict[str, float] = {}
    sys.meta_path.insert(0, _ImportTimer(imports))
    written = [False]

    def write() -> None:
        if written[0]:
            return
        written[0] = True
        t = os.times()
        record = {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "argv": sys.argv[:4],
            "cpu": t.user + t.system,
            "startup": startup,
            "imports": imports,
            "test": os.environ.get("PYTEST_CURRENT_TEST", "")[:200],
        }
        try:
            with open(os.path.join(out_dir, "procs.jsonl"), "a") as fh:
                fh.write(json.dumps(record) + "\n")
        except OSError:
            pass

    atexit.register(write)
    real_exit = os._exit

    def exit_after_writing(code: int) -> None:
        write()
        real_exit(code)

    os._exit = exit_after_writing  # type: ignore[assignment]


# only when run as a script (the .pth's runpy.run_path), not when imported for WATCHED; a venv's
# site-packages can be on the path twice (lib and its lib64 link), and the .pth then runs twice
if __name__ == "<run_path>" and os.environ.get("AOTI_GUARD_CENSUS_DIR") and not getattr(sys, "_aoti_guard_census", False):
    sys._aoti_guard_census = True  # type: ignore[attr-defined]
    install(os.environ["AOTI_GUARD_CENSUS_DIR"])
