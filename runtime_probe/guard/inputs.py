"""The guarded loader's input checks: the manifest's I/O contract compiled into one closure per
tensor leaf, checked on every call BEFORE native code runs.

Every violation raises InputContractError naming the argument:
``x: dim 0 is 100, above the maximum 64 of 'batch'``. Per call the checks are precompiled closures
over plain Python values (no pytree walk for flat signatures), so they cost a few microseconds per
argument.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime_probe.guard.data_checks import value_symbols
from runtime_probe.guard.env import Env as _Env
from runtime_probe.guard.fastpath import compile_fast
from runtime_probe.guard.rules import Check, compile_call, compile_leaf
from runtime_probe.guard.values import value_check, with_value_check
from runtime_probe.package.manifest import InputSpec, Manifest
from runtime_probe.reporting.errors import InputContractError

__all__ = ["Check", "InputChecker", "LeafInputs", "dotted"]

_INDEX = re.compile(r"\[(\d+)\]")


def dotted(name: str) -> str:
    r"""A leaf name in dotted form: ``past_key_values['key_cache'][0]`` -> ``past_key_values.key_cache.0``
    (the form of the output names, so a decode loop can feed outputs back in).

    A key runs from ``['`` (or ``["``) to the first ``']`` (``"]``) after it on the same line, as
    the pattern ``\[(['"])(.*?)\1\]`` read it; scanned by hand, because that pattern rescanned the
    rest of the line from every ``['`` that had no end: a manifest's name of megabytes took hours."""
    out: list[str] = []
    # per quote, the end of the line where it has no closing ``q]`` after some start: none after
    # a later start on that line either, so that line is not searched again
    unclosed_until = {"'": -1, '"': -1}
    line_end = -1
    i = 0
    while i < len(name):
        if name[i] == "[":
            if line_end < i:
                line_end = name.find("\n", i)
                line_end = len(name) if line_end < 0 else line_end
            quote = name[i + 1 : i + 2]
            if quote in unclosed_until and unclosed_until[quote] != line_end:
                end = name.find(quote + "]", i + 2, line_end)
                if end >= 0:
                    out.append("." + name[i + 2 : end])
                    i = end + 2
                    continue
                unclosed_until[quote] = line_end
            index = _INDEX.match(name, i)
            if index is not None:
                out.append("." + index.group(1))
                i = index.end()
                continue
        following = name.find("[", i + 1)
        following = len(name) if following < 0 else following
        out.append(name[i:following])  # up to the next "[" in one step
        i = following
    return "".join(out)


class LeafInputs(dict):  # type: ignore[type-arg]
    """A nested argument given by its leaf names, in the manifest's order (what ``check`` returns
    for one): the model is then run on the flat leaves, without rebuilding the library type."""


@dataclass(frozen=True)
class _Param:
    name: str
    passed: str  # how it was passed at export: positional | keyword


class InputChecker:
    """The input contract of a manifest, compiled into per-argument checks for one device.

    ``check(*args, **kwargs)`` raises InputContractError naming the argument, or returns the
    (args, kwargs) in the layout the model was exported with.
    """

    def __init__(self, manifest: Manifest, device: Any, *, check_values: bool = False, no_fast_path: bool = False) -> None:
        import torch
        from torch.utils import _pytree as pytree

        self.manifest = manifest
        self.device = device
        self._pytree = pytree
        self._params = [_Param(p.name, p.passed) for p in manifest.io.params if p.passed != "omitted"]
        self._names = {p.name for p in self._params}
        self._positional = [p.name for p in self._params if p.passed == "positional"]
        self._keyword = [p.name for p in self._params if p.passed == "keyword"]
        by_param: dict[str, list[InputSpec]] = {}
        for spec in manifest.io.inputs:
            by_param.setdefault(spec.param, []).append(spec)
        self._flat = {name: len(specs) == 1 and specs[0].name == name for name, specs in by_param.items()}
        self._specs = by_param
        reads = value_symbols(manifest.io)
        self._checks = {spec.name: compile_leaf(spec, device, torch, reads=reads.get(spec.name)) for spec in manifest.io.inputs}
        # the call's rules (rules.CALL_RULES: export's shape guards, the model's checks on values):
        # after every symbol is bound, in both paths below
        self._guards = compile_call(manifest.io)
        if check_values:
            for spec in manifest.io.inputs:
                if spec.tensor is not None and spec.tensor.value_range is not None:
                    self._checks[spec.name] = with_value_check(self._checks[spec.name], spec.name, spec.tensor.value_range, torch)
        # All arguments positional, one leaf each (the common case): check(*args) skips binding by
        # name and checks the arguments in place (same checks, same order, same result).
        self._fast: list[Check] | None = None
        if not self._keyword and all(self._flat.get(n, False) for n in self._positional):
            self._fast = [self._checks[n] for n in self._positional]
        # The generated fast path (fastpath.py): accepts a good call in one function; a call it
        # does not accept takes check_slow, which raises the error (or accepts, e.g. a Parameter).
        self.fast = None if no_fast_path else compile_fast(manifest, device, torch)
        self._values: list[tuple[bool, int | str, Callable[[Any], None]]] = []
        if check_values:
            for spec in manifest.io.inputs:
                if spec.tensor is not None and spec.tensor.value_range is not None and spec.name == spec.param:
                    where: int | str = self._positional.index(spec.name) if spec.name in self._positional else spec.name
                    self._values.append((isinstance(where, int), where, value_check(spec.name, spec.tensor.value_range, torch)))
        self.signature = inspect.Signature(
            [
                inspect.Parameter(
                    p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD if p.passed == "positional" else inspect.Parameter.KEYWORD_ONLY
                )
                for p in self._params
            ]
        )

    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self._params]

    @property
    def positional_names(self) -> list[str]:
        return list(self._positional)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(self._positional):
            raise InputContractError(
                f"too many positional arguments: {len(args)} given, the model takes {len(self._positional)} ({', '.join(self._positional)})",
                code="input.count",
                argument=None,
                expected=str(len(self._positional)),
                found=str(len(args)),
                hint="pass the remaining inputs by keyword: " + ", ".join(self._keyword) if self._keyword else None,
            )
        values = dict(zip(self._positional, args))
        for key, value in kwargs.items():
            if key not in self._names:
                raise InputContractError(
                    f"{key}: unexpected keyword argument (the model takes {', '.join(self.param_names)})",
                    code="input.count",
                    argument=key,
                    expected="one of " + ", ".join(self.param_names),
                    found=key,
                )
            if key in values:
                raise InputContractError(f"{key}: given both by position and by keyword", code="input.count", argument=key)
            values[key] = value
        for p in self._params:
            if p.name not in values:
                raise InputContractError(
                    f"{p.name}: missing argument",
                    code="input.count",
                    argument=p.name,
                    expected="a value",
                    found="nothing",
                    hint=f"the model was exported with {p.name} passed {'by position' if p.passed == 'positional' else 'by keyword'}",
                )
        return values

    def check(self, *args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Validate a call; returns (args, kwargs) in the exported layout. Raises InputContractError."""
        fast = self.fast
        if fast is not None:
            try:
                out = fast(*args, **kwargs)
            except Exception:  # noqa: BLE001 - a hostile object or a binding error: the slow path says what
                out = None
            if out is not None:
                if self._values:
                    self.check_values(out)
                return out
        return self.check_slow(*args, **kwargs)

    def check_values(self, call: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
        """The value ranges (check_values=True) of a call the contract accepted, in leaf order."""
        args, kwargs = call
        for positional, where, check in self._values:
            check(args[where] if positional else kwargs[where])  # type: ignore[index]

    def check_slow(self, *args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The diagnosing path: every rule in order; raises the first violation."""
        fast = self._fast
        if fast is not None and not kwargs and len(args) == len(fast):
            env = _Env()
            for leaf_check, value in zip(fast, args):
                leaf_check(value, env)
            env.finish()
            if self._guards is not None:
                self._guards(env)
            return args, {}
        values = self._bind(args, kwargs)
        env = _Env()
        for name, value in values.items():
            if self._flat.get(name, False):
                self._checks[name](value, env)
            else:
                values[name] = self._check_nested(name, value, env)
        env.finish()
        if self._guards is not None:
            self._guards(env)
        return tuple(values[n] for n in self._positional), {n: values[n] for n in self._keyword}

    def _check_nested(self, param: str, value: Any, env: _Env) -> Any:
        pytree = self._pytree
        specs = self._specs.get(param, [])
        by_name = self._by_leaf_name(param, value)
        if by_name is not None:
            for name, leaf in by_name.items():
                self._checks[name](leaf, env)
            return by_name
        leaves = pytree.tree_flatten_with_path(value)[0]
        names = [param + pytree.keystr(path) for path, _ in leaves]
        expected = [s.name for s in specs]
        if names != expected:
            raise InputContractError(
                f"{param}: structure differs from the export (leaves {', '.join(names[:6]) or 'none'})",
                code="input.count",
                argument=param,
                expected=", ".join(expected[:6]),
                found=", ".join(names[:6]) or "none",
            )
        for name, (_, leaf) in zip(names, leaves):
            self._checks[name](leaf, env)
        return value

    def _by_leaf_name(self, param: str, value: Any) -> LeafInputs | None:
        """A nested argument given as a mapping from its leaf names to values, in place of a type
        this process cannot build (a ``DynamicCache`` without transformers): the names are the
        manifest's (``past_key_values['key_cache'][0]``), their dotted form
        (``past_key_values.key_cache.0``, as ``NamedOutputs`` names the outputs) or the dotted form
        without the argument's name (``key_cache.0``). None when ``value`` is not such a mapping."""
        if not isinstance(value, Mapping):
            return None
        specs = self._specs.get(param, [])
        try:
            if not specs or len(value) != len(specs):
                return None
            out = LeafInputs()
            for spec in specs:
                full = dotted(spec.name)
                short = full[len(param) + 1 :] if full.startswith(param + ".") else full
                for key in (spec.name, full, short):
                    if key in value:
                        out[spec.name] = value[key]
                        break
                else:
                    return None
        except Exception:  # noqa: BLE001 - a hostile mapping: the structure check below says what is wrong
            return None
        return out
