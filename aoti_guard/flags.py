"""Command-line flags declared as data, and the click options made from them.

A table of ``OptionFlag`` (the probe's ``runtime_probe.probe.flags.Flag``, plus what the build and
fleet commands need: choices, units, a converter) names, for each flag, the field of an options
dataclass it sets; the flag's default is read from that dataclass (``SOURCE``), its one home.
``click_option``/``flag_options`` turn a table (the probe's too) into click options, and
``option_fields`` (runtime_probe's, re-exported: one mapping for every table) turns the parsed
values back into the dataclass's fields, each flag converting its own value (``field_value``). The tables:
``aoti_guard/build_flags.py`` (build), ``aoti_guard/fleet/flags.py`` (fleet k8s, fleet slurm),
``runtime_probe/probe/flags.py`` (probe, for both command lines).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import click

from runtime_probe.probe.flags import Flag, option_fields

__all__ = ["OptionFlag", "click_option", "field_default", "flag_options", "option_fields"]

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def field_default(cls: type, name: str) -> Any:
    """The default of dataclass ``cls``'s field ``name`` (a ``default_factory`` called). Raises
    KeyError for a field without a default, or no such field."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise KeyError(f"{cls.__name__}.{name} has no default")
    raise KeyError(f"{cls.__name__} has no field {name!r}")


@dataclass(frozen=True)
class OptionFlag(Flag):
    """A flag that sets field ``field`` of the dataclass ``SOURCE`` (a subclass per table names it).

    ``choices``: kind "choice"; ``unit``: the field holds the value times ``unit``
    (``--golden-max-mb`` sets bytes); ``convert``: turns the given value into the field's (a flag
    not given leaves the field's default); ``param``: click's parameter name where it is not the
    flag's own (``--key`` -> ``sign_key``)."""

    SOURCE: ClassVar[type | None] = None

    choices: tuple[str, ...] = ()
    unit: int = 1
    convert: Callable[[Any], Any] | None = None
    param: str | None = None
    required: bool = False
    hidden: bool = False

    @property
    def dest(self) -> str:
        return self.param or super().dest

    @property
    def default_value(self) -> Any:
        """What the command line holds when the flag is not given: the field's default in the
        flag's unit (none for a converted flag: its field keeps the default)."""
        if self.kind == "switch":
            return False
        if self.kind == "onoff":  # not given: the field's default decides (None: the build decides)
            return None
        if self.field is None or self.required or self.SOURCE is None:
            return self.default
        if self.convert is not None:
            return () if self.multiple else None
        value = field_default(self.SOURCE, self.field)
        return value / self.unit if self.unit != 1 else value

    def field_value(self, value: Any) -> tuple[bool, Any]:
        """The probe flag's rule (``Flag.field_value``) and this table's kinds: an on/off pair
        given neither way, or a converted flag given nothing, leaves the field's default; a
        repeatable one sets a tuple (click's; a library caller's list); ``unit`` scales."""
        if self.kind == "onoff" and value is None:
            return False, None
        if self.multiple:
            value = tuple(value or ())
        if self.convert is not None:
            return (True, self.convert(value)) if value else (False, None)
        if self.invert:
            return True, not value
        return True, int(value * self.unit) if self.unit != 1 else value


def _click_type(flag: Flag) -> Any:
    if flag.kind == "path":
        return click.Path(dir_okay=False, allow_dash=True)
    if flag.kind == "folder":
        return click.Path(file_okay=False)
    if flag.kind == "choice" and isinstance(flag, OptionFlag):
        return click.Choice(flag.choices)
    if flag.kind == "float":
        return click.FloatRange(min=flag.minimum)
    if flag.kind == "int":
        return click.INT if flag.minimum is None else click.IntRange(min=int(flag.minimum))
    return None


def click_option(flag: Flag) -> Decorator:
    """The click option for one flag of a table (declared once, for every command line that takes it)."""
    names = [flag.short, flag.name] if flag.short else [flag.name]
    kwargs: dict[str, Any] = {"help": flag.help + "." if flag.help else None}
    if isinstance(flag, OptionFlag):
        kwargs.update(required=flag.required or None, hidden=flag.hidden or None)
    if flag.kind == "switch":
        kwargs["is_flag"] = True
    elif flag.kind == "onoff":  # --X / --no-X / neither (None)
        names[-1] = f"{flag.name}/--no-{flag.name.lstrip('-')}"
        kwargs["is_flag"] = True
    else:
        default = flag.default_value
        kwargs.update(metavar=flag.metavar, default=default, type=_click_type(flag))
        if flag.kind in ("float", "int") or default not in (None, (), ""):
            kwargs["show_default"] = True
        if flag.multiple:
            kwargs["multiple"] = True
    given = {k: v for k, v in kwargs.items() if v is not None}
    if flag.kind == "onoff":
        given["default"] = None  # click's own default for a --X/--no-X pair is False: None is "neither given"
    return click.option(*names, flag.dest, **given)


def flag_options(flags: Sequence[Flag]) -> Decorator:
    """Every flag of ``flags`` as a click option, in the table's order."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for flag in reversed(flags):
            fn = click_option(flag)(fn)
        return fn

    return decorate
