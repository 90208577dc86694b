"""Strict conversion between frozen dataclasses and JSON values, driven by the type hints.

Manifests arrive from untrusted packages, so reading validates every field's type and reports the
path of the first bad value (``manifest.io.inputs[2].tensor.dtype: expected str, found int``)
instead of failing later with an AttributeError deep inside a check.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

from runtime_probe.formats.numbers import NumberError, finite_float, json_int

__all__ = ["SerdeError", "from_jsonable", "to_jsonable"]

T = TypeVar("T")

_MAX_DEPTH = 64


class SerdeError(ValueError):
    """A JSON value does not have the shape a dataclass field needs. ``path`` says where."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


# Optional fields added after a schema shipped: written only when set, so a manifest without them
# reads (and hashes) as it did before.
OMIT_IF_NONE = frozenset(
    {"value_range", "cuda_archs", "guards", "compact_samples", "runtime_fqn", "origin", "build_check", "in_state_dict", "kept_constants"}
)


def to_jsonable(obj: Any) -> Any:
    """Dataclasses -> dicts (field order kept), tuples -> lists; other JSON values unchanged."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: to_jsonable(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not (f.name in OMIT_IF_NONE and getattr(obj, f.name) is None)
        }
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def from_jsonable(cls: type[T], data: Any, path: str = "$") -> T:
    """Build ``cls`` (a dataclass) from ``data``, checking every value against the type hints.

    Unknown keys are ignored (a newer MINOR schema may add fields); missing keys fall back to the
    field's default or are an error.
    """
    return typing.cast(T, _convert(cls, data, path, 0))


def _key(key: object) -> str:
    """A key as a path shows it: bounded (a hostile key can be megabytes long)."""
    text = str(key)
    return text if len(text) <= 80 else text[:79] + "…"


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _origin_args(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    if tp not in _ORIGINS:
        _ORIGINS[tp] = (typing.get_origin(tp), typing.get_args(tp))
    return _ORIGINS[tp]


_ORIGINS: dict[Any, tuple[Any, tuple[Any, ...]]] = {}


def _fits(option: Any, value: Any) -> bool:
    """Whether ``value`` is of the JSON kind ``option`` reads (any number for int and float: a
    float given for an int is then refused by the number reader, which says why)."""
    if option is Any:
        return True
    if option is bool or option is str:
        return isinstance(value, option)
    if option is int or option is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, list) if _origin_args(option)[0] is tuple else isinstance(value, dict)


def _convert(tp: Any, value: Any, path: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise SerdeError(path, "nested too deeply")
    origin, args = _origin_args(tp)
    if tp is Any:
        return _check_json_value(value, path, depth)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        # Only the options of the value's own kind are tried: a value is never converted twice
        # over (an exception per element made 60,000 sizes cost seconds), and a refusal says what
        # was wrong inside the one that fits.
        errors: list[SerdeError] = []
        for option in (o for o in args if o is not type(None) and _fits(o, value)):
            try:
                return _convert(option, value, path, depth + 1)
            except SerdeError as exc:
                errors.append(exc)
        if errors:
            raise max(errors, key=lambda e: len(e.path))
        names = " or ".join("null" if o is type(None) else getattr(o, "__name__", str(o)) for o in args)
        raise SerdeError(path, f"expected {names}, found {_type_name(value)}")
    if origin is tuple:
        if not isinstance(value, list):
            raise SerdeError(path, f"expected a list, found {_type_name(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
        if len(args) != len(value):
            raise SerdeError(path, f"expected {len(args)} items, found {len(value)}")
        return tuple(_convert(a, v, f"{path}[{i}]", depth + 1) for i, (a, v) in enumerate(zip(args, value)))
    if origin in (dict, Mapping) or tp is dict:
        args = args or (str, Any)
        if not isinstance(value, dict):
            raise SerdeError(path, f"expected an object, found {_type_name(value)}")
        return {str(k): _convert(args[1], v, f"{path}.{_key(k)}", depth + 1) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise SerdeError(path, f"expected an object, found {_type_name(value)}")
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in value:
                kwargs[f.name] = _convert(hints[f.name], value[f.name], f"{path}.{f.name}", depth + 1)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SerdeError(f"{path}.{f.name}", "missing")
        try:
            return tp(**kwargs)
        except (TypeError, ValueError) as exc:
            raise SerdeError(path, str(exc)) from None
    if tp is bool:
        if not isinstance(value, bool):
            raise SerdeError(path, f"expected a boolean, found {_type_name(value)}")
        return value
    if tp is int or tp is float:
        return _number(json_int if tp is int else finite_float, value, path)
    if tp is str:
        if not isinstance(value, str):
            raise SerdeError(path, f"expected a string, found {_type_name(value)}")
        return value
    raise TypeError(f"unsupported type hint {tp!r} at {path}")  # a bug in our dataclasses


def _check_json_value(value: Any, path: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise SerdeError(path, "nested too deeply")
    if isinstance(value, dict):
        return {k: _check_json_value(v, f"{path}.{_key(k)}", depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_check_json_value(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, int) and not isinstance(value, bool):
        return _number(json_int, value, path)
    if isinstance(value, float):
        return _number(finite_float, value, path)
    return value


def _number(read: Any, value: Any, path: str) -> Any:
    """A number through the one reader of numbers (formats/numbers.py), its refusal said at ``path``."""
    try:
        return read(value)
    except NumberError as exc:
        raise SerdeError(path, str(exc)) from None
