"""The attack pass's cases (issue 40): one ``Attack`` per attempt, grouped by class.

An attack is a callable that makes its hostile input, runs the real product code on it (the CLI in
a subprocess, a rendered script under bash, the library in a child) and returns one line saying
what happened; it raises ``AttackSucceeded`` (an AssertionError) when the defence did not hold:
a payload ran, a file outside its folder was written or lost, a crash, a hang past its bound, a
faked verdict, raw control characters reached a medium. ``tests/hostile/test_attack_pass.py``
runs each as a test; ``python -m tests.hostile.report`` tabulates them in docs/reliability.md.

Modules: ``tests/hostile/attacks/<area>.py``, each with ``ATTACKS: list[Attack]``, named in
``AREAS`` below.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AREAS", "Attack", "AttackContext", "AttackSucceeded", "all_attacks"]

AREAS = ("scripts", "fleet_report", "build_inputs", "parsers", "files", "probe_data")


class AttackSucceeded(AssertionError):
    """The defence did not hold; the message says what the attack achieved."""


@dataclass
class AttackContext:
    """What an attack may use: its own empty folder and a fresh copy of a real package."""

    tmp: Path
    static_package: Path  # the `static` test model's package (tests/integration/models.py), never modified

    def package_copy(self, name: str = "model.pt2") -> Path:
        """A private copy of the real package that the attack may change."""
        out = self.tmp / name
        shutil.copyfile(self.static_package, out)
        return out


@dataclass(frozen=True)
class Attack:
    name: str  # unique, kebab-case: the test id and the report's row
    klass: str  # the class in docs/reliability.md ("generated scripts", "numeric overflow", ...)
    what: str  # the hostile input, in a few words
    expected: str  # what must happen
    run: Callable[[AttackContext], str]  # returns what happened, in one line; raises AttackSucceeded


def all_attacks() -> list[Attack]:
    import importlib

    out: list[Attack] = []
    for area in AREAS:
        out.extend(importlib.import_module(f"tests.hostile.attacks.{area}").ATTACKS)
    names = [a.name for a in out]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"attack names used twice: {sorted(dupes)}")
    return out
