"""The build's flags are declared once (aoti_guard/build_flags.py): one flag per BuildOptions field,
every default read from BuildOptions, every flag reaching its field."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import click
import pytest

from aoti_guard.build_flags import BUILD_FLAGS, BuildFlag, build_options
from aoti_guard.builder.options import BuildOptions
from aoti_guard.cli import cli, main
from aoti_guard.flags import field_default

# a value other than the default, for the flags whose kind alone does not give one
_GIVEN = {
    "--output": "other.pt2",
    "--device": "cpu",
    "--dynamic": "x:0=batch:1..8",
    "--inductor-config": "max_autotune=true",
    "--cuda-arch": "8.0,9.0",
    "--golden-max-mb": "2",
    "--seed": "7",
    "--timeout": "30",
    "--minify-timeout": "30",
    "--atol": "0.5",
    "--rtol": "0.5",
}


def _parsed(argv: list[str]) -> dict[str, Any]:
    command = cli.commands["build"]
    return dict(command.make_context("build", argv).params)


def test_every_build_options_field_has_exactly_one_flag() -> None:
    fields = Counter(flag.field for flag in BUILD_FLAGS if flag.field is not None)
    assert set(fields) == {f.name for f in dataclasses.fields(BuildOptions)}
    assert [name for name, n in fields.items() if n != 1] == []
    names = [flag.name for flag in BUILD_FLAGS]
    assert len(names) == len(set(names))


def test_the_flags_defaults_are_build_options_defaults() -> None:
    """Nothing given: exactly BuildOptions' own defaults (a default written on a flag would differ)."""
    assert build_options(_parsed(["-o", "m.pt2"])) == BuildOptions(output="m.pt2")
    for flag in BUILD_FLAGS:
        if flag.field is None or flag.required or flag.convert is not None:
            continue
        if flag.kind == "switch":  # off leaves the field at its default: True for an --no-X switch
            assert field_default(BuildOptions, flag.field) is flag.invert, flag.name
        elif flag.unit != 1:
            assert flag.default_value * flag.unit == field_default(BuildOptions, flag.field), flag.name
        else:
            assert flag.default_value == field_default(BuildOptions, flag.field), flag.name


def _value_for(flag: BuildFlag) -> list[str]:
    if flag.kind == "switch":
        return [flag.name]
    if flag.kind == "choice":
        default = field_default(BuildOptions, str(flag.field))
        return [flag.name, next(c for c in flag.choices if c != default)]
    return [flag.name, _GIVEN.get(flag.name, "somewhere")]


@pytest.mark.parametrize("flag", [f for f in BUILD_FLAGS if f.field is not None], ids=lambda f: f.name)
def test_each_flag_sets_its_field(flag: BuildFlag) -> None:
    argv = ["-o", "m.pt2", *_value_for(flag)] if flag.name != "--output" else _value_for(flag)
    options = build_options(_parsed(argv))
    assert getattr(options, str(flag.field)) != getattr(BuildOptions(output="m.pt2"), str(flag.field))
    others = {f.name for f in dataclasses.fields(BuildOptions)} - {flag.field, "output"}
    assert all(getattr(options, name) == field_default(BuildOptions, name) for name in others)


def test_converted_values() -> None:
    options = build_options(
        _parsed(
            ["-o", "m.pt2", "--golden-max-mb", "0.5", "--inductor-config", "a=1", "--inductor-config", "b=x", "--cuda-arch", "8.0, 90a"]
        )
    )
    assert options.golden_max_bytes == 512 * 1024
    assert options.inductor_configs == {"a": 1, "b": "x"}
    assert options.cuda_archs == ("80", "90a")


@pytest.mark.parametrize(
    ("argv", "message", "hint"),
    [
        (["--inductor-config", "max_autotune"], "cannot read --inductor-config 'max_autotune'", "KEY=VALUE"),
        (["--cuda-arch", "hopper"], "--cuda-arch 'hopper'", "compute capabilities"),
    ],
)
def test_an_unreadable_value_exits_2_with_a_hint(argv: list[str], message: str, hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "-o", "m.pt2", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and hint in err and "Traceback" not in err


def test_the_choices_are_the_deciding_modules() -> None:
    from aoti_guard.builder.compile import targets
    from aoti_guard.builder.twin import schedule as twin
    from aoti_guard.builder.validate import onnx_reference

    choices = {flag.name: flag.choices for flag in BUILD_FLAGS if flag.kind == "choice"}
    assert choices == {
        "--twin-schedule": twin.SCHEDULES,
        "--twin-weights": twin.WEIGHTS,
        "--cpu-isa": tuple(targets.CPU_ISA_LEVELS),
        "--reference": onnx_reference.REFERENCES,
    }
    text = " ".join(click.Context(cli.commands["build"]).get_help().split())
    assert "--twin-schedule [auto|concurrent|after]" in text and "[default: 16.0;" in text
