"""The guarded call's fast path: the whole input contract of one signature as one generated
Python function that only says "all rules hold" (returns the call layout) or "look closer"
(returns None).

Its lines are the fast forms of the rules in rules.py (``RULES``, ``CALL_RULES``: each rule's
diagnosing check and fast form are written there, side by side); this module only assembles them
into one function per signature. It accepts only when the diagnosing checks would accept
(tests/unit/test_rule_agreement.py); a flat signature whose every rule has a fast form gets one,
anything else (a nested parameter, a symbol only an expression gives) makes ``compile_fast``
return None and every call takes the diagnosing path.
When it returns None, or raises (a hostile object's attribute, or Python's own binding of the
arguments to the signature), the diagnosing path runs from the start, so every error, its code,
argument and message come from one place. Measured in bench/guard_overhead.py and
bench/guard_paths.py; the options compared are in docs/benchmarks.md.

Why generated code: straight-line attribute tests without a loop, a closure call per leaf or a
per-call environment object cost about a third of the per-call time of the rule closures. Only
parameter names (checked as identifiers), names fastsource.py makes and integers are written
into the source; every other value (dtypes, the tensor type) is passed in as a global.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

from runtime_probe.guard.data_checks import value_symbols
from runtime_probe.guard.fastsource import PREFIX, FastSource, NoFastForm
from runtime_probe.guard.rules import CALL_RULES, RULES, Leaf
from runtime_probe.package.manifest import InputSpec, Manifest

__all__ = ["FastCheck", "compile_fast", "compile_fast_flat"]

# (args, kwargs) -> ((args, kwargs) in the exported layout) | None
FastCheck = Callable[..., "tuple[tuple[Any, ...], dict[str, Any]] | None"]


def compile_fast(manifest: Manifest, device: Any, torch: Any) -> FastCheck | None:
    """The generated check for ``manifest``'s contract on ``device``, or None when it has a rule
    the fast path does not express (nested parameters, a symbol only an expression gives).
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
    """Every rule's fast form (rules.RULES, then rules.CALL_RULES), in table order; None when
    one has none for this contract (NoFastForm), or the signature is not flat."""
    params = [p for p in manifest.io.params if p.passed != "omitted"]
    by_param: dict[str, list[InputSpec]] = {}
    for spec in manifest.io.inputs:
        by_param.setdefault(spec.param, []).append(spec)
    names = [p.name for p in params]
    if any(not n.isidentifier() or keyword.iskeyword(n) or n.startswith(PREFIX) for n in names):
        return None
    if any(len(by_param.get(n, [])) != 1 or by_param[n][0].name != n for n in names):
        return None  # a nested parameter: its leaves are not plain names
    reads = value_symbols(manifest.io)
    src = FastSource()
    body: list[str] = []
    try:
        for name in names:
            spec = by_param[name][0]
            kind = "tensor" if spec.kind == "tensor" and spec.tensor is not None else "constant"
            leaf = Leaf(spec, device, torch, reads.get(name))
            for rule in RULES:
                if rule.kind == kind:
                    body += rule.fast(leaf, src)
        for later in src.tail:
            body += later(src)
        for call_rule in CALL_RULES:
            body += call_rule.fast(manifest.io, src)
    except NoFastForm:
        return None
    positional = [p.name for p in params if p.passed == "positional"]
    keyword_only = [p.name for p in params if p.passed == "keyword"]
    tensors = [n for n in names if by_param[n][0].kind == "tensor" and by_param[n][0].tensor is not None]
    return _Generated(positional, keyword_only, tensors, body, src.globals)
