"""Every attack of the attack pass (tests/hostile/attack.py) against the real product: each must hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.attack import Attack, AttackContext, all_attacks
from tests.integration.conftest import Built

ATTACKS = all_attacks()


@pytest.mark.integration
@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_holds(attack: Attack, static_pkg: Built, tmp_path: Path) -> None:
    what_happened = attack.run(AttackContext(tmp=tmp_path, static_package=static_pkg.path))
    assert what_happened, "an attack says what happened"
