"""fleet k8s / fleet slurm flags, declared once (aoti_guard/fleet/flags.py): a flag per field of the
command's value, the plan's defaults read from the plan, every flag reaching its field."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

from aoti_guard.cli import cli
from aoti_guard.flags import OptionFlag
from aoti_guard.fleet.flags import K8S_FLAGS, SLURM_FLAGS, K8sArgs, SlurmArgs
from aoti_guard.fleet.k8s import K8sPlan
from aoti_guard.fleet.slurm import SlurmPlan

_REQUIRED = {"k8s": ["--image", "img"], "slurm": ["--reports", "/r"]}
_GIVEN = {"--select": "a=b", "--deadline": "120", "--count": "3", "--cpus": "4", "--wait-timeout": "5"}


def _values(command: str, argv: list[str]) -> dict[str, Any]:
    return dict(cli.commands["fleet"].commands[command].make_context(command, ["/m.pt2", *argv]).params)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("args_type", "flags"), [(K8sArgs, K8S_FLAGS), (SlurmArgs, SLURM_FLAGS)])
def test_every_field_but_the_package_has_exactly_one_flag(args_type: type, flags: tuple[OptionFlag, ...]) -> None:
    fields = Counter(flag.field for flag in flags)
    assert set(fields) == {f.name for f in dataclasses.fields(args_type)} - {"package"}
    assert [name for name, n in fields.items() if n != 1] == []


def test_no_flags_given_render_the_plans_defaults() -> None:
    k8s = K8sArgs.from_values("/m.pt2", _values("k8s", _REQUIRED["k8s"]))
    assert k8s.plan("run1", ()) == K8sPlan(package="/m.pt2", image="img", run_id="run1")
    slurm = SlurmArgs.from_values("/m.pt2", _values("slurm", _REQUIRED["slurm"]))
    assert slurm.plan() == SlurmPlan(package="/m.pt2", reports="/r")


def _argv(flag: OptionFlag) -> list[str]:
    if flag.kind == "switch":
        return [flag.name]
    if flag.kind == "int":
        return [flag.name, _GIVEN.get(flag.name, "1")]
    return [flag.name, _GIVEN.get(flag.name, "x")]


@pytest.mark.parametrize(
    ("command", "args_type", "flag"),
    [("k8s", K8sArgs, f) for f in K8S_FLAGS] + [("slurm", SlurmArgs, f) for f in SLURM_FLAGS],
    ids=[f"k8s{f.name}" for f in K8S_FLAGS] + [f"slurm{f.name}" for f in SLURM_FLAGS],
)
def test_each_flag_sets_its_field(command: str, args_type: Any, flag: OptionFlag) -> None:
    base = args_type.from_values("/m.pt2", _values(command, _REQUIRED[command]))
    given = args_type.from_values("/m.pt2", _values(command, [*_REQUIRED[command], *_argv(flag)]))
    changed = [f.name for f in dataclasses.fields(args_type) if getattr(base, f.name) != getattr(given, f.name)]
    assert changed == [flag.field]
