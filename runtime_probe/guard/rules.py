"""Every per-call input rule, written once: ``RULES`` (a leaf's rules) and ``CALL_RULES`` (rules
over a whole call), each with its diagnosing check and its fast form side by side.

The diagnosing check (the slow path) raises InputContractError naming the argument, with expected
and found; the fast form is the lines of fastpath.py's generated function that return None ("look
closer") when the rule may not hold. A new rule is one more ``LeafRule`` or ``CallRule`` here, with
both forms; tests/unit/test_rule_agreement.py feeds every rule's passing and violating inputs to
both paths and fails on any rule without a case, or where they disagree.

A tensor leaf's rules run in table order, which decides which violation is reported first (part of
the behaviour): what the value is (a plain dense tensor of the dtype on the device; it runs before
any other attribute is read), its memory, its rank and static sizes, its symbolic sizes and the
relations between inputs that share a symbol, its derived sizes, its strides, and the value a
data-dependent check reads (``x.item()``). Then the call's rules: export's shape guards, and the
model's own checks on values (``torch._check(b < y.shape[0])``).

Every rule is evaluated, or the call is refused: a rule over a symbol that no input has bound yet
(the strides ``(1, 8*s)`` of a ``[8*s, 4]`` input) is deferred to ``Env.finish``, which binds the
derived symbols first; one that cannot be evaluated even then refuses the call (``input.unchecked``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.guard import data_checks as _data
from runtime_probe.guard import shape_guards as _guards
from runtime_probe.guard.fastsource import FastSource, NoFastForm, emit_expr, shape_var
from runtime_probe.guard.refusals import (
    layout_hint,
    range_hint,
    refuse_flags,
    refuse_layout,
    refuse_storage,
    refuse_subclass,
)
from runtime_probe.guard.rule_types import CallRule, Check, Leaf, LeafRule, Rule
from runtime_probe.package.manifest import Dim, InputSpec, IOContract
from runtime_probe.reporting.errors import InputContractError

if TYPE_CHECKING:
    from runtime_probe.guard.env import Env

__all__ = ["CALL_RULES", "RULES", "CallRule", "Check", "Leaf", "LeafRule", "compile_leaf", "fmt_shape", "plain_tensor_types"]


def fmt_shape(shape: tuple[int | Dim, ...]) -> str:
    return "[" + ", ".join(str(d) if isinstance(d, int) else d.expr for d in shape) + "]"


def compile_leaf(spec: InputSpec, device: Any, torch: Any, *, reads: str | None = None) -> Check:
    """The diagnosing check of one leaf: every rule of ``RULES`` for its kind, in order."""
    leaf = Leaf(spec, device, torch, reads)
    kind = "tensor" if spec.kind == "tensor" and spec.tensor is not None else "constant"
    rules = [r for r in (rule.check(leaf) for rule in RULES if rule.kind == kind) if r is not None]
    if kind == "constant":
        only = rules[0]
        return lambda value, env: only(value, None, env)
    what, rest = rules[0], rules[1:]

    def check_tensor(value: Any, env: Env) -> None:
        what(value, None, env)
        shape = value.shape
        for rule in rest:
            rule(value, shape, env)

    return check_tensor


def compile_call(contract: IOContract) -> Callable[[Env], None] | None:
    """The diagnosing check of ``CALL_RULES`` over one call, after ``Env.finish``; None when the
    contract has none."""
    checks = [c for c in (rule.check(contract) for rule in CALL_RULES) if c is not None]
    if not checks:
        return None

    def check_call(env: Env) -> None:
        for check in checks:
            check(env)

    return check_call


# -- a constant the model was specialized on ------------------------------------------------------


def _constant_rule(leaf: Leaf) -> Rule:
    name, expected_value, torch = leaf.name, leaf.spec.value, leaf.torch

    def check_constant(value: Any, shape: Any, env: Env) -> None:
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


def _constant_fast(leaf: Leaf, src: FastSource) -> list[str]:
    v = src.const(leaf.spec.value)
    return [f"if type({leaf.name}) is not type({v}) or {leaf.name} != {v}: return None"]


# -- what the value is: a plain dense tensor, of the dtype, on the device --------------------------


def _what_rule(leaf: Leaf) -> Rule:
    name, t, device, torch = leaf.name, leaf.tensor, leaf.device, leaf.torch
    dtype = getattr(torch, t.dtype)
    dev_type, dev_index = device.type, device.index
    where = f"{dev_type}:{dev_index}" if dev_index is not None else dev_type
    shape_text = fmt_shape(t.shape)
    tensor_type = torch.Tensor
    plain = plain_tensor_types(torch)
    strided = torch.strided

    def check_what(value: Any, shape: Any, env: Env) -> None:
        if not isinstance(value, tensor_type):
            raise InputContractError(
                f"{name}: expected a tensor, got {type(value).__name__}",
                code="input.type",
                argument=name,
                expected=f"tensor {t.dtype}{shape_text}",
                found=type(value).__name__,
            )
        # Before any other attribute is read: a subclass can answer .shape/.dtype as it likes, and
        # the native code reads the raw memory behind it (segfault for FakeTensor, TwoTensor).
        if type(value) not in plain:
            refuse_subclass(name, value)
        if value.layout is not strided or value.is_nested:
            refuse_layout(name, value)
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
        if value.is_neg() or value.is_conj():
            refuse_flags(name, value)

    return check_what


def _what_fast(leaf: Leaf, src: FastSource) -> list[str]:
    name, t, device = leaf.name, leaf.tensor, leaf.device
    tensor_type, dtype, strided = src.const(leaf.torch.Tensor), src.const(getattr(leaf.torch, t.dtype)), src.const(leaf.torch.strided)
    if device.type == "cpu":
        where = f"not {name}.is_cpu"
    elif device.type == "cuda" and device.index is None:
        where = f"not {name}.is_cuda"
    elif device.type == "cuda":
        where = f"not {name}.is_cuda or {name}.get_device() != {int(device.index)}"
    else:
        raise NoFastForm(f"device {device.type}")
    # torch allows the conjugate bit on complex dtypes only (an internal assert), and the dtype
    # matched: a real contract skips that test
    conj = f" or {name}.is_conj()" if t.dtype.startswith("complex") else ""
    return [
        # exactly a Tensor: a Parameter (accepted) or a subclass (refused) looks closer
        f"if type({name}) is not {tensor_type} or {name}.dtype is not {dtype}: return None",
        f"if {where}: return None",
        f"if {name}.layout is not {strided} or {name}.is_nested or {name}.is_neg(){conj}: return None",
        f"{shape_var(name)} = {name}.shape",
    ]


def plain_tensor_types(torch: Any) -> frozenset[type]:
    """The exact types the compiled code can read: a dense tensor, or a parameter (a plain tensor
    with a flag). Subclasses of either are refused (they may override anything)."""
    return frozenset((torch.Tensor, torch.nn.Parameter))


# -- memory: the view fits its storage ------------------------------------------------------------


def _storage_rule(leaf: Leaf) -> Rule:
    """The compiled code reads ``storage_offset + sum((size - 1) * stride) + 1`` elements from the
    tensor's data pointer, whatever its storage holds: a view whose storage was resized or shrunk
    under it, a zero tensor (``torch._efficientzerotensor``, no memory) and a functorch wrapper
    (vmap, grad, functionalize: the memory is the wrapped tensor's, of another shape) are refused
    here. A tensor of no elements reads nothing."""
    name, torch = leaf.name, leaf.torch
    itemsize = int(getattr(torch, leaf.tensor.dtype).itemsize)  # the dtype rule ran first

    def check_storage(value: Any, shape: Any, env: Env) -> None:
        if value.numel() == 0:
            return
        try:
            nbytes = int(value.untyped_storage().nbytes())
            ptr = value.data_ptr()
        except Exception:  # noqa: BLE001 - a wrapper without storage (vmap, grad) raises; say what it is
            refuse_storage(name, value, torch, None, 0)
        extent = value.storage_offset() + sum((n - 1) * st for n, st in zip(shape, value.stride())) + 1
        if not ptr or extent * itemsize > nbytes:
            refuse_storage(name, value, torch, nbytes, extent * itemsize)

    return check_storage


def _storage_fast(leaf: Leaf, src: FastSource) -> list[str]:
    """The view fits its memory: a storage resized or shrunk under it, a zero tensor or a
    functionalize wrapper (no data) return None; vmap/grad wrappers raise here."""
    name, t = leaf.name, leaf.tensor
    itemsize = int(getattr(leaf.torch, t.dtype).itemsize)
    if t.contiguous:  # the stride rule returns None for any other layout: nbytes is the extent
        return [
            f"if not {name}.data_ptr() or {name}.storage_offset() * {itemsize} + {name}.nbytes > "
            f"{name}.untyped_storage().nbytes(): return None"
        ]
    st, sh = src.name(), shape_var(name)
    reach = " + ".join(f"({sh}[{k}] - 1) * {st}[{k}]" for k in range(len(t.shape))) or "0"
    return [
        f"{st} = {name}.stride()",
        f"if {name}.numel() and (not {name}.data_ptr() or ({name}.storage_offset() + {reach} + 1) * {itemsize} > "
        f"{name}.untyped_storage().nbytes()): return None",
    ]


# -- rank and static sizes ------------------------------------------------------------------------


def _static_rule(leaf: Leaf) -> Rule:
    name, t = leaf.name, leaf.tensor
    rank = len(t.shape)
    static = [(i, d) for i, d in enumerate(t.shape) if isinstance(d, int)]
    shape_text = fmt_shape(t.shape)

    def check_static(value: Any, shape: Any, env: Env) -> None:
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

    return check_static


def _static_fast(leaf: Leaf, src: FastSource) -> list[str]:
    sh = shape_var(leaf.name)
    lines = [f"if len({sh}) != {len(leaf.tensor.shape)}: return None"]
    lines += [f"if {sh}[{i}] != {int(d)}: return None" for i, d in enumerate(leaf.tensor.shape) if isinstance(d, int)]
    return lines


# -- symbolic sizes: ranges, and equal sizes where inputs share a symbol --------------------------


def _symbolic_rule(leaf: Leaf) -> Rule | None:
    name, t = leaf.name, leaf.tensor
    symbolic = [(i, d) for i, d in enumerate(t.shape) if isinstance(d, Dim) and _symexpr.is_symbol(d.expr)]
    if not symbolic:
        return None

    def check_symbolic(value: Any, shape: Any, env: Env) -> None:
        for i, d in symbolic:
            size = shape[i]
            _check_bounds(name, i, size, d)
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

    return check_symbolic


def _check_bounds(name: str, i: int, size: int, d: Dim) -> None:
    if size < d.min:
        raise InputContractError(
            f"{name}: dim {i} is {size}, below the minimum {d.min} of {d.expr!r}",
            code="input.range",
            argument=name,
            expected=f"{d.expr} >= {d.min}",
            found=str(size),
            hint=range_hint(name, i, size, d),
        )
    if d.max is not None and size > d.max:
        raise InputContractError(
            f"{name}: dim {i} is {size}, above the maximum {d.max} of {d.expr!r}",
            code="input.range",
            argument=name,
            expected=f"{d.expr} <= {d.max}",
            found=str(size),
            hint=range_hint(name, i, size, d),
        )


def _symbolic_fast(leaf: Leaf, src: FastSource) -> list[str]:
    sh, lines = shape_var(leaf.name), []
    for i, d in enumerate(leaf.tensor.shape):
        if not (isinstance(d, Dim) and _symexpr.is_symbol(d.expr)):
            continue
        if d.expr in src.symbols:
            lines.append(f"if {sh}[{i}] != {src.symbols[d.expr]}: return None")
            continue
        var = src.bind(d.expr)
        high = f" or {var} > {int(d.max)}" if d.max is not None else ""
        lines += [f"{var} = {sh}[{i}]", f"if {var} < {int(d.min)}{high}: return None"]
    return lines


def _derived_rule(leaf: Leaf) -> Rule | None:
    """Sizes given by an expression (``2*batch``): the range now, the value once every input has
    bound its symbols (``Env.finish``)."""
    name, t = leaf.name, leaf.tensor
    derived: list[tuple[int, Dim, Callable[[Any], int] | None]] = []
    for i, d in enumerate(t.shape):
        if isinstance(d, Dim) and not _symexpr.is_symbol(d.expr):
            try:
                derived.append((i, d, _symexpr.compile_expr(d.expr)))
            except _symexpr.ExprError:
                derived.append((i, d, None))
    if not derived:
        return None

    def check_derived(value: Any, shape: Any, env: Env) -> None:
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
            if fn is None:  # outside the expression grammar (a manifest the archive checks let through)
                raise InputContractError(
                    f"{name}: dim {i} ({size}) could not be checked against {d.expr!r}; refused rather than passed unchecked",
                    code="input.unchecked",
                    argument=name,
                    expected=d.expr,
                    found=str(size),
                    hint="the manifest's size expression is outside the grammar this runtime evaluates: rebuild the package",
                )
            env.pending.append((name, i, d, fn, size))

    return check_derived


def _derived_fast(leaf: Leaf, src: FastSource) -> list[str]:
    """The range now; the value after every leaf, over the symbols plain sizes bound (a symbol
    only an expression gives, ``8*seq8``, has no fast form: Env.finish solves it)."""
    sh, lines = shape_var(leaf.name), []
    for i, d in enumerate(leaf.tensor.shape):
        if not isinstance(d, Dim) or _symexpr.is_symbol(d.expr):
            continue
        var = src.name()
        high = f" or {var} > {int(d.max)}" if d.max is not None else ""
        lines += [f"{var} = {sh}[{i}]", f"if {var} < {int(d.min)}{high}: return None"]
        src.later(_equals(var, d.expr))
    return lines


def _equals(var: str, expr: str) -> Callable[[FastSource], list[str]]:
    def lines(src: FastSource) -> list[str]:
        return [f"if {var} != {emit_expr(expr, src)}: return None"]

    return lines


# -- strides --------------------------------------------------------------------------------------


def _stride_rule(leaf: Leaf) -> Rule:
    name, t = leaf.name, leaf.tensor
    if t.contiguous:
        return _contiguous_rule(name)
    stride_fns = [_symexpr.compile_expr(s) for s in t.stride]

    def compare(got: tuple[int, ...], shape: Any, values: dict[str, int]) -> None:
        want = tuple(fn(values) for fn in stride_fns)  # ExprError: a symbol without a value
        if any(w != g and shape[k] > 1 for k, (w, g) in enumerate(zip(want, got))):
            raise InputContractError(
                f"{name}: strides {got} differ from the compiled layout {want}",
                code="input.stride",
                argument=name,
                expected=str(want),
                found=str(got),
                hint=layout_hint(name, tuple(shape), want),
            )

    def check_strides(value: Any, shape: Any, env: Env) -> None:
        got = tuple(value.stride())
        try:
            compare(got, shape, {k: v[0] for k, v in env.symbols.items()})
        except _symexpr.ExprError:
            # a stride over a symbol only a derived size gives (8*s): checked once finish() binds it
            env.defer(name, "strides", lambda values: compare(got, tuple(shape), values))

    return check_strides


def _contiguous_rule(name: str) -> Rule:
    def check_contiguous(value: Any, shape: Any, env: Env) -> None:
        if not value.is_contiguous():
            raise InputContractError(
                f"{name}: strides {tuple(value.stride())} are not the contiguous layout the model was compiled for",
                code="input.stride",
                argument=name,
                expected="contiguous",
                found=str(tuple(value.stride())),
                hint=f"pass {name}.contiguous()",
            )

    return check_contiguous


def _stride_fast(leaf: Leaf, src: FastSource) -> list[str]:
    name, t = leaf.name, leaf.tensor
    if t.contiguous:
        return [f"if not {name}.is_contiguous(): return None"]
    st, sh = src.name(), shape_var(name)

    def compare(s: FastSource) -> list[str]:  # a stride over a symbol a later input binds: after every leaf
        return [f"if {st}[{k}] != {emit_expr(str(w), s)} and {sh}[{k}] > 1: return None" for k, w in enumerate(t.stride)]

    src.later(compare)
    return [f"{st} = {name}.stride()", f"if len({st}) != {len(t.stride)}: return None"]


# -- the table ------------------------------------------------------------------------------------


RULES: tuple[LeafRule, ...] = (
    LeafRule("constant", "constant", ("input.type", "input.value"), _constant_rule, _constant_fast),
    LeafRule(
        "what",
        "tensor",
        ("input.type", "input.subclass", "input.layout", "input.dtype", "input.device", "input.flags"),
        _what_rule,
        _what_fast,
    ),
    LeafRule("storage", "tensor", ("input.storage",), _storage_rule, _storage_fast),
    LeafRule("static", "tensor", ("input.shape",), _static_rule, _static_fast),
    LeafRule("symbolic", "tensor", ("input.range",), _symbolic_rule, _symbolic_fast),
    LeafRule("derived", "tensor", ("input.range", "input.unchecked"), _derived_rule, _derived_fast),
    LeafRule("strides", "tensor", ("input.stride", "input.unchecked"), _stride_rule, _stride_fast),
    LeafRule("value", "tensor", ("input.data_check",), _data.value_rule, _data.value_fast),
)

CALL_RULES: tuple[CallRule, ...] = (
    CallRule("guards", ("input.guard",), _guards.compile_guards, _guards.fast_guard_lines),
    CallRule("data_checks", ("input.data_check",), _data.compile_data_checks, _data.fast_data_lines),
)
