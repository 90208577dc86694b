"""The contract rules of one input leaf, compiled into a diagnosing check (the slow path).

``compile_leaf`` turns an InputSpec into one closure. A tensor leaf's closure runs the rule
families in a fixed order, each compiled by its own function below: what the value is (a tensor,
its dtype, its device), its rank and static sizes, its symbolic sizes and the relations between
inputs that share a symbol, and its strides. Each rule raises InputContractError naming the
argument, with expected and found; the order decides which violation is reported first, so it is
part of the behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime_probe.errors import InputContractError
from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim, InputSpec, TensorSpec

if TYPE_CHECKING:
    from runtime_probe.guard.env import Env

__all__ = ["Check", "compile_leaf", "fmt_shape", "plain_tensor_types"]

Check = Callable[[Any, "Env"], None]
# A rule of a tensor leaf: (value, value.shape, env) -> None, or raises InputContractError.
Rule = Callable[[Any, Any, "Env"], None]


def fmt_shape(shape: tuple[int | Dim, ...]) -> str:
    return "[" + ", ".join(str(d) if isinstance(d, int) else d.expr for d in shape) + "]"


def compile_leaf(spec: InputSpec, device: Any, torch: Any) -> Check:
    """The check of one leaf: a constant the model was specialized on, or a tensor."""
    if spec.kind != "tensor" or spec.tensor is None:
        return _constant_check(spec.name, spec.value, torch)
    t = spec.tensor
    what = _what_rule(spec.name, t, device, torch)
    rules = [
        rule
        for rule in (
            _static_rule(spec.name, t),
            _symbolic_rule(spec.name, t),
            _derived_rule(spec.name, t),
            _stride_rule(spec.name, t),
        )
        if rule is not None
    ]

    def check_tensor(value: Any, env: Env) -> None:
        what(value)
        shape = value.shape
        for rule in rules:
            rule(value, shape, env)

    return check_tensor


def _constant_check(name: str, expected_value: Any, torch: Any) -> Check:
    def check_constant(value: Any, env: Env) -> None:
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


# -- what the value is: a plain dense tensor, of the dtype, on the device --------------------------


def _what_rule(name: str, t: TensorSpec, device: Any, torch: Any) -> Callable[[Any], None]:
    dtype = getattr(torch, t.dtype)
    dev_type, dev_index = device.type, device.index
    where = f"{dev_type}:{dev_index}" if dev_index is not None else dev_type
    shape_text = fmt_shape(t.shape)
    tensor_type = torch.Tensor
    plain = plain_tensor_types(torch)
    strided = torch.strided

    def check_what(value: Any) -> None:
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
            _refuse_subclass(name, value)
        if value.layout is not strided or value.is_nested:
            _refuse_layout(name, value)
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
            _refuse_flags(name, value)

    return check_what


def plain_tensor_types(torch: Any) -> frozenset[type]:
    """The exact types the compiled code can read: a dense tensor, or a parameter (a plain tensor
    with a flag). Subclasses of either are refused (they may override anything)."""
    return frozenset((torch.Tensor, torch.nn.Parameter))


def _refuse_subclass(name: str, value: Any) -> None:
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    raise InputContractError(
        f"{name}: is a {type(value).__name__}, a torch.Tensor subclass; the compiled model reads the raw memory of plain tensors only",
        code="input.subclass",
        argument=name,
        expected="torch.Tensor (or nn.Parameter)",
        found=kind[:120],
        hint="pass a plain dense tensor holding the data (a FakeTensor or wrapper subclass has none the model can read)",
    )


def _refuse_layout(name: str, value: Any) -> None:
    found = "nested" if value.is_nested else str(value.layout).replace("torch.", "").lstrip("_")
    raise InputContractError(
        f"{name}: is a {found} tensor, the model was compiled for a dense (strided) tensor",
        code="input.layout",
        argument=name,
        expected="strided",
        found=found,
        hint=f"pass {name}.to_dense()" if found != "nested" else "pass a dense tensor (e.g. the padded batch)",
    )


def _refuse_flags(name: str, value: Any) -> None:
    conj = value.is_conj()
    found, fix, lost = ("conjugate bit", "resolve_conj", "conjugated") if conj else ("negative bit", "resolve_neg", "negated")
    raise InputContractError(
        f"{name}: has the {found} set (a lazy view); the compiled model reads the memory as it is, so it would compute with the un-{lost} values",
        code="input.flags",
        argument=name,
        expected="no conjugate or negative bit",
        found=found,
        hint=f"pass {name}.{fix}()",
    )


# -- rank and static sizes ------------------------------------------------------------------------


def _static_rule(name: str, t: TensorSpec) -> Rule:
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


# -- symbolic sizes: ranges, and equal sizes where inputs share a symbol --------------------------


def _symbolic_rule(name: str, t: TensorSpec) -> Rule | None:
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
        )
    if d.max is not None and size > d.max:
        raise InputContractError(
            f"{name}: dim {i} is {size}, above the maximum {d.max} of {d.expr!r}",
            code="input.range",
            argument=name,
            expected=f"{d.expr} <= {d.max}",
            found=str(size),
        )


def _derived_rule(name: str, t: TensorSpec) -> Rule | None:
    """Sizes given by an expression (``2*batch``): the range now, the value once every input has
    bound its symbols (``Env.finish``)."""
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
            if fn is not None:
                env.pending.append((name, i, d, fn, size))

    return check_derived


# -- strides --------------------------------------------------------------------------------------


def _stride_rule(name: str, t: TensorSpec) -> Rule:
    if t.contiguous:
        return _contiguous_rule(name)
    stride_fns = [_symexpr.compile_expr(s) for s in t.stride]

    def check_strides(value: Any, shape: Any, env: Env) -> None:
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
