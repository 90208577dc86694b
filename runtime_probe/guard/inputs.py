"""The guarded loader's input checks: the manifest's I/O contract compiled into one closure per
tensor leaf, checked on every call BEFORE native code runs.

Every violation raises InputContractError naming the argument:
``x: dim 0 is 100, above the maximum 64 of 'batch'``. Per call the checks are precompiled closures
over plain Python values (no pytree walk for flat signatures), so they cost a few microseconds per
argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime_probe.errors import InputContractError
from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim, InputSpec, Manifest

__all__ = ["Check", "InputChecker"]

Check = Callable[[Any, "_Env"], None]


@dataclass(frozen=True)
class _Param:
    name: str
    passed: str  # how it was passed at export: positional | keyword


class InputChecker:
    """The input contract of a manifest, compiled into per-argument checks for one device.

    ``check(*args, **kwargs)`` raises InputContractError naming the argument, or returns the
    (args, kwargs) in the layout the model was exported with.
    """

    def __init__(self, manifest: Manifest, device: Any) -> None:
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
        self._checks = {spec.name: _compile_leaf(spec, device, torch) for spec in manifest.io.inputs}
        # All arguments positional, one leaf each (the common case): check(*args) skips binding by
        # name and checks the arguments in place (same checks, same order, same result).
        self._fast: list[Check] | None = None
        if not self._keyword and all(self._flat.get(n, False) for n in self._positional):
            self._fast = [self._checks[n] for n in self._positional]
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
        fast = self._fast
        if fast is not None and not kwargs and len(args) == len(fast):
            env = _Env()
            for leaf_check, value in zip(fast, args):
                leaf_check(value, env)
            env.finish()
            return args, {}
        values = self._bind(args, kwargs)
        env = _Env()
        for name, value in values.items():
            if self._flat.get(name, False):
                self._checks[name](value, env)
            else:
                self._check_nested(name, value, env)
        env.finish()
        return tuple(values[n] for n in self._positional), {n: values[n] for n in self._keyword}

    def _check_nested(self, param: str, value: Any, env: _Env) -> None:
        pytree = self._pytree
        specs = self._specs.get(param, [])
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


def _fmt_shape(shape: tuple[int | Dim, ...]) -> str:
    return "[" + ", ".join(str(d) if isinstance(d, int) else d.expr for d in shape) + "]"


def _compile_leaf(spec: InputSpec, device: Any, torch: Any) -> Check:
    name = spec.name
    if spec.kind != "tensor" or spec.tensor is None:
        expected_value = spec.value

        def check_constant(value: Any, env: _Env) -> None:
            if isinstance(value, torch.Tensor):
                raise InputContractError(
                    f"{name}: got a tensor, but the model was specialized for the value {expected_value!r} at export",
                    code="input.type",
                    argument=name,
                    expected=repr(expected_value),
                    found="tensor",
                )
            if value != expected_value and not (isinstance(value, float) and repr(value) == expected_value):
                raise InputContractError(
                    f"{name}: is {value!r}, but the model was specialized for {expected_value!r} at export (other values are silently ignored)",
                    code="input.value",
                    argument=name,
                    expected=repr(expected_value),
                    found=repr(value),
                    hint="re-export with this value, or make it a tensor input",
                )

        return check_constant
    t = spec.tensor
    dtype = getattr(torch, t.dtype)
    rank = len(t.shape)
    static = [(i, d) for i, d in enumerate(t.shape) if isinstance(d, int)]
    symbolic = [(i, d) for i, d in enumerate(t.shape) if isinstance(d, Dim) and _symexpr.is_symbol(d.expr)]
    derived: list[tuple[int, Dim, Callable[[Any], int] | None]] = []
    for i, d in enumerate(t.shape):
        if isinstance(d, Dim) and not _symexpr.is_symbol(d.expr):
            try:
                derived.append((i, d, _symexpr.compile_expr(d.expr)))
            except _symexpr.ExprError:
                derived.append((i, d, None))
    contiguous = t.contiguous
    stride_fns = None if contiguous else [_symexpr.compile_expr(s) for s in t.stride]
    dev_type, dev_index = device.type, device.index
    shape_text = _fmt_shape(t.shape)
    where = f"{dev_type}:{dev_index}" if dev_index is not None else dev_type

    def check_tensor(value: Any, env: _Env) -> None:
        if not isinstance(value, torch.Tensor):
            raise InputContractError(
                f"{name}: expected a tensor, got {type(value).__name__}",
                code="input.type",
                argument=name,
                expected=f"tensor {t.dtype}{shape_text}",
                found=type(value).__name__,
            )
        if value.dtype is not dtype:
            found = str(value.dtype).replace("torch.", "")
            raise InputContractError(
                f"{name}: dtype is {found}, expected {t.dtype}",
                code="input.dtype",
                argument=name,
                expected=t.dtype,
                found=found,
                hint=f"convert with {name}.to(torch.{t.dtype})",
            )
        vd = value.device
        if vd != device and (vd.type != dev_type or (dev_index is not None and vd.index != dev_index)):
            raise InputContractError(
                f"{name}: is on {vd}, the model runs on {where}",
                code="input.device",
                argument=name,
                expected=where,
                found=str(vd),
                hint=f"move it with {name}.to('{where}')",
            )
        shape = value.shape
        if len(shape) != rank:
            raise InputContractError(
                f"{name}: has {len(shape)} dimension(s), expected {rank} {shape_text}",
                code="input.shape",
                argument=name,
                expected=shape_text,
                found=str(list(shape)),
            )
        for i, size in static:
            if shape[i] != size:
                raise InputContractError(
                    f"{name}: dim {i} is {shape[i]}, expected {size} (shape {shape_text})",
                    code="input.shape",
                    argument=name,
                    expected=str(size),
                    found=str(shape[i]),
                )
        for i, d in symbolic:
            size = shape[i]
            if size < d.min:
                raise InputContractError(
                    f"{name}: dim {i} is {size}, below the minimum {d.min} of {d.expr!r}",
                    code="input.range",
                    argument=name,
                    expected=f"{d.expr} >= {d.min}",
                    found=str(size),
                )
            if d.max is not None and size > d.max:
                raise InputContractError(
                    f"{name}: dim {i} is {size}, above the maximum {d.max} of {d.expr!r}",
                    code="input.range",
                    argument=name,
                    expected=f"{d.expr} <= {d.max}",
                    found=str(size),
                )
            bound = env.symbols.get(d.expr)
            if bound is None:
                env.symbols[d.expr] = (size, name, i)  # formatted only for an error message
            elif bound[0] != size:
                source = f"{bound[1]}.shape[{bound[2]}]"
                raise InputContractError(
                    f"{name}: dim {i} is {size}, but {d.expr!r} is {bound[0]} (from {source})",
                    code="input.range",
                    argument=name,
                    expected=f"{d.expr} = {bound[0]}",
                    found=str(size),
                    hint=f"{name}.shape[{i}] and {source} must be equal",
                )
        for i, d, fn in derived:
            size = shape[i]
            if size < d.min or (d.max is not None and size > d.max):
                raise InputContractError(
                    f"{name}: dim {i} is {size}, outside [{d.min}, {d.max}] of {d.expr!r}",
                    code="input.range",
                    argument=name,
                    expected=f"{d.min} <= {d.expr} <= {d.max}",
                    found=str(size),
                )
            if fn is not None:
                env.pending.append((name, i, d, fn, size))
        if contiguous:
            if not value.is_contiguous():
                raise InputContractError(
                    f"{name}: strides {tuple(value.stride())} are not the contiguous layout the model was compiled for",
                    code="input.stride",
                    argument=name,
                    expected="contiguous",
                    found=str(tuple(value.stride())),
                    hint=f"pass {name}.contiguous()",
                )
        elif stride_fns is not None:
            values = {k: v[0] for k, v in env.symbols.items()}
            try:
                want = tuple(fn(values) for fn in stride_fns)
            except _symexpr.ExprError:
                return
            got = tuple(value.stride())
            if any(w != g and shape[k] > 1 for k, (w, g) in enumerate(zip(want, got))):
                raise InputContractError(
                    f"{name}: strides {got} differ from the compiled layout {want}",
                    code="input.stride",
                    argument=name,
                    expected=str(want),
                    found=str(got),
                    hint="make the tensor's layout match the example used at export",
                )

    return check_tensor


class _Env:
    """Per-call bindings: symbol -> (size, input name, dim) it was first read from, and derived dims
    to check last."""

    __slots__ = ("pending", "symbols")

    def __init__(self) -> None:
        self.symbols: dict[str, tuple[int, str, int]] = {}
        self.pending: list[tuple[str, int, Dim, Callable[[Any], int], int]] = []

    def finish(self) -> None:
        if not self.pending:
            return
        values = {k: v[0] for k, v in self.symbols.items()}
        for name, i, d, fn, size in self.pending:
            try:
                want = fn(values)
            except _symexpr.ExprError:
                continue  # a symbol no input carries plainly: the range check above is all we can do
            if want != size:
                raise InputContractError(
                    f"{name}: dim {i} is {size}, but {d.expr!r} is {want} here",
                    code="input.range",
                    argument=name,
                    expected=f"{d.expr} = {want}",
                    found=str(size),
                )
