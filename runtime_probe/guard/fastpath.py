"""The guarded call's fast path: the whole input contract of one signature as one generated
Python function that only says "all rules hold" (returns the call layout) or "look closer"
(returns None).

It accepts exactly when the diagnosing checks (rules.py) would accept, for the contracts it
handles (flat parameters; static, symbolic and contiguous tensors; constants); anything else it
does not handle makes ``compile_fast`` return None and every call takes the diagnosing path.
When it returns None, or raises (a hostile object's attribute, or Python's own binding of the
arguments to the signature), the diagnosing path runs from the start, so every error, its code,
argument and message come from one place. Measured in bench/guard_overhead.py and
bench/guard_paths.py; the options compared are in docs/benchmarks.md.

Why generated code: straight-line attribute tests without a loop, a closure call per leaf or a
per-call environment object cost about a third of the per-call time of the rule closures. Only
parameter names (checked as identifiers) and integers are written into the source; every other
value (dtypes, the tensor type) is passed in as a global.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.guard.shape_guards import fast_guard_lines
from runtime_probe.package.manifest import Dim, InputSpec, Manifest, TensorSpec

__all__ = ["FastCheck", "compile_fast", "compile_fast_flat"]

# (args, kwargs) -> ((args, kwargs) in the exported layout) | None
FastCheck = Callable[..., "tuple[tuple[Any, ...], dict[str, Any]] | None"]
_PREFIX = "_aoti_guard_"  # globals of the generated code; a parameter may not start with it


class _Unsupported(Exception):
    """This contract has a rule the fast path does not express: use the diagnosing path only."""


def compile_fast(manifest: Manifest, device: Any, torch: Any) -> FastCheck | None:
    """The generated check for ``manifest``'s contract on ``device``, or None when it has a rule
    the fast path does not express (nested parameters, derived sizes, explicit strides).
    It returns the call in the exported layout, ``(args, kwargs)``."""
    gen = _generate(manifest, device, torch)
    if gen is None:
        return None
    kwargs = "{" + ", ".join(f"{k!r}: {k}" for k in gen.keyword_only) + "}"
    call = f"({', '.join(gen.positional)}{',' if len(gen.positional) == 1 else ''}), {kwargs}"
    return gen.build(manifest, call)


def compile_fast_flat(manifest: Manifest, device: Any, torch: Any, order: list[str]) -> FastCheck | None:
    """The same check, returning the list of tensor arguments in ``order`` (parameter names: the
    order of the flattened call that AOTI's runner takes), or None as ``compile_fast``."""
    gen = _generate(manifest, device, torch)
    if gen is None or sorted(order) != sorted(gen.tensors):
        return None
    return gen.build(manifest, "[" + ", ".join(order) + "]")


class _Generated:
    def __init__(self, positional: list[str], keyword_only: list[str], tensors: list[str], body: list[str], env: dict[str, Any]) -> None:
        self.positional, self.keyword_only, self.tensors, self.body, self.env = positional, keyword_only, tensors, body, env

    def build(self, manifest: Manifest, returned: str) -> FastCheck:
        signature = ", ".join(self.positional + (["*", *self.keyword_only] if self.keyword_only else []))
        source = "\n".join([f"def fast({signature}):", *("    " + line for line in self.body), f"    return {returned}"])
        env = dict(self.env)
        exec(compile(source, f"<aoti-guard fast path of {manifest.model_name}>", "exec"), env)
        fast: FastCheck = env["fast"]
        return fast


def _generate(manifest: Manifest, device: Any, torch: Any) -> _Generated | None:
    params = [p for p in manifest.io.params if p.passed != "omitted"]
    by_param: dict[str, list[InputSpec]] = {}
    for spec in manifest.io.inputs:
        by_param.setdefault(spec.param, []).append(spec)
    names = [p.name for p in params]
    if any(not n.isidentifier() or keyword.iskeyword(n) or n.startswith(_PREFIX) for n in names):
        return None
    env: dict[str, Any] = {f"{_PREFIX}T": torch.Tensor, f"{_PREFIX}S": torch.strided}
    body: list[str] = []
    symbols: dict[str, str] = {}
    tensors: list[str] = []
    try:
        for j, name in enumerate(names):
            specs = by_param.get(name, [])
            if len(specs) != 1 or specs[0].name != name:
                raise _Unsupported(name)
            spec = specs[0]
            if spec.kind != "tensor" or spec.tensor is None:
                env[f"{_PREFIX}V{j}"] = spec.value
                body.append(f"if type({name}) is not type({_PREFIX}V{j}) or {name} != {_PREFIX}V{j}: return None")
                continue
            env[f"{_PREFIX}D{j}"] = getattr(torch, spec.tensor.dtype)
            body += _tensor_lines(name, j, spec.tensor, device, symbols, int(env[f"{_PREFIX}D{j}"].itemsize))
            tensors.append(name)
        guards = fast_guard_lines(manifest.io, symbols, env, _PREFIX)  # export's shape guards (shape_guards.py)
        if guards is None:
            raise _Unsupported("guards")
        body += guards
    except _Unsupported:
        return None
    positional = [p.name for p in params if p.passed == "positional"]
    keyword_only = [p.name for p in params if p.passed == "keyword"]
    return _Generated(positional, keyword_only, tensors, body, env)


def _tensor_lines(name: str, j: int, t: TensorSpec, device: Any, symbols: dict[str, str], itemsize: int) -> list[str]:
    if not t.contiguous:
        raise _Unsupported(name)
    if device.type == "cpu":
        where = f"not {name}.is_cpu"
    elif device.index is None:
        where = f"not {name}.is_cuda"
    else:
        where = f"not {name}.is_cuda or {name}.get_device() != {int(device.index)}"
    conj = f" or {name}.is_conj()" if t.dtype.startswith("complex") else ""
    lines = [
        f"if type({name}) is not {_PREFIX}T or {name}.dtype is not {_PREFIX}D{j}: return None",
        f"if {where}: return None",
        # torch allows the conjugate bit on complex dtypes only (an internal assert), and the dtype
        # matched: a real contract skips that test
        f"if {name}.layout is not {_PREFIX}S or {name}.is_nested or {name}.is_neg(){conj}: return None",
        f"s = {name}.shape",
        f"if len(s) != {len(t.shape)}: return None",
    ]
    for i, d in enumerate(t.shape):
        if isinstance(d, int):
            lines.append(f"if s[{i}] != {int(d)}: return None")
        elif isinstance(d, Dim) and _symexpr.is_symbol(d.expr):
            if d.expr in symbols:
                lines.append(f"if s[{i}] != {symbols[d.expr]}: return None")
                continue
            var = symbols[d.expr] = f"{_PREFIX}s{len(symbols)}"
            high = f" or {var} > {int(d.max)}" if d.max is not None else ""
            lines += [f"{var} = s[{i}]", f"if {var} < {int(d.min)}{high}: return None"]
        else:
            raise _Unsupported(name)  # a derived size (2*batch): the diagnosing path checks it
    lines.append(f"if not {name}.is_contiguous(): return None")
    # the view fits its memory (rules._storage_rule): a storage resized or shrunk under it, a zero
    # tensor or a functionalize wrapper (no data) return None; vmap/grad wrappers raise here
    lines.append(
        f"if not {name}.data_ptr() or {name}.storage_offset() * {itemsize} + {name}.nbytes > {name}.untyped_storage().nbytes(): return None"
    )
    return lines
