"""The attack pass in docs/reliability.md: every ``Attack`` (tests/hostile/attack.py) run once
against the real product, counted by class, each with what happened."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime_probe.reporting.escaping import for_markdown

from .attack import Attack, AttackContext, AttackSucceeded, all_attacks


@dataclass(frozen=True)
class AttackOutcome:
    attack: Attack
    held: bool
    happened: str
    seconds: float


def run_attacks(package: Path, attacks: Sequence[Attack] | None = None) -> list[AttackOutcome]:
    out = []
    for attack in attacks if attacks is not None else all_attacks():
        with tempfile.TemporaryDirectory(prefix=f"attack-{attack.name[:40]}-") as tmp:
            started = time.monotonic()
            try:
                happened, held = attack.run(AttackContext(tmp=Path(tmp), static_package=package)), True
            except AttackSucceeded as broke:
                happened, held = f"NOT HELD: {broke}", False
            except Exception as exc:  # noqa: BLE001 - an attack's own failure is shown, not hidden
                happened, held = f"the attack itself failed: {type(exc).__name__}: {exc}", False
            # the attack's own temporary folder is this machine's path: the doc shows it as <tmp>
            out.append(AttackOutcome(attack, held, happened.replace(tmp, "<tmp>"), time.monotonic() - started))
    return out


def attack_lines(outcomes: Sequence[AttackOutcome]) -> list[str]:
    if not outcomes:
        return []
    classes = list(dict.fromkeys(o.attack.klass for o in outcomes))
    lines = [
        "",
        "## The attack pass (issue 40)",
        "",
        "Attempts a fourth attack pass made on the product (`tests/hostile/attacks/`, one module per area; the same",
        "cases run as tests in `tests/hostile/test_attack_pass.py`): each builds its hostile input, runs the real",
        "product on it (the CLI, a rendered script under bash with stub commands, the loader in a child) and says",
        "what happened; an attack that achieves its aim (a payload ran, a file outside its folder changed, a",
        "crash or hang, a faked verdict, raw control characters or live Markdown) is **NOT HELD**.",
        "",
        f"- attacks tried: {len(outcomes)}; held: {sum(o.held for o in outcomes)}",
        "",
        "| class | attacks | held |",
        "| --- | --- | --- |",
        *[
            f"| {k} | {sum(o.attack.klass == k for o in outcomes)} | {sum(o.attack.klass == k and o.held for o in outcomes)} |"
            for k in classes
        ],
        "",
        "| attack | class | what it is | expected | what happened | time | result |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        a = o.attack
        lines.append(
            f"| `{a.name}` | {a.klass} | {for_markdown(a.what)} | {for_markdown(a.expected)} | {for_markdown(o.happened)} "
            f"| {o.seconds:.1f} s | {'held' if o.held else '**NOT HELD**'} |"
        )
    return lines
