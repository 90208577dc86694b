"""The contract rules of one input leaf, compiled into a diagnosing check (the slow path).

``compile_leaf`` turns an InputSpec into one closure. A tensor leaf's closure runs the rule
families in a fixed order, each compiled by its own function below: what the value is (a tensor,
its dtype, its device), its rank and static sizes, its symbolic sizes and the relations between
inputs that share a symbol, and its strides. Each rule raises InputContractError naming the
argument, with expected and found; the order decides which violation is reported first, so it is
part of the behaviour.

Every rule is evaluated, or the call is refused: a rule over a symbol that no input has bound yet
(the strides ``(1, 8*s)`` of a ``[8*s, 4]`` input) is deferred to ``Env.finish``, which binds the
derived symbols first; one that cannot be evaluated even then refuses the call (``input.unchecked``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim, InputSpec, TensorSpec
from runtime_probe.reporting.errors import InputContractError

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
            _storage_rule(spec.name, t, torch),
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


# -- memory: the view fits its storage ------------------------------------------------------------

_FUNCTORCH = (
    ("is_batchedtensor", "a BatchedTensor (inside torch.func.vmap)"),
    ("is_gradtrackingtensor", "a GradTrackingTensor (inside torch.func.grad, jacrev, vjp...)"),
    ("is_functionaltensor", "a FunctionalTensor (inside torch.func.functionalize)"),
)


def _storage_rule(name: str, t: TensorSpec, torch: Any) -> Rule:
    """The compiled code reads ``storage_offset + sum((size - 1) * stride) + 1`` elements from the
    tensor's data pointer, whatever its storage holds: a view whose storage was resized or shrunk
    under it, a zero tensor (``torch._efficientzerotensor``, no memory) and a functorch wrapper
    (vmap, grad, functionalize: the memory is the wrapped tensor's, of another shape) are refused
    here. A tensor of no elements reads nothing."""
    itemsize = int(getattr(torch, t.dtype).itemsize)  # the dtype rule ran first

    def check_storage(value: Any, shape: Any, env: Env) -> None:
        if value.numel() == 0:
            return
        try:
            nbytes = int(value.untyped_storage().nbytes())
            ptr = value.data_ptr()
        except Exception:  # noqa: BLE001 - a wrapper without storage (vmap, grad) raises; say what it is
            _refuse_storage(name, value, torch, None, 0)
        extent = value.storage_offset() + sum((n - 1) * st for n, st in zip(shape, value.stride())) + 1
        if not ptr or extent * itemsize > nbytes:
            _refuse_storage(name, value, torch, nbytes, extent * itemsize)

    return check_storage


def _refuse_storage(name: str, value: Any, torch: Any, nbytes: int | None, needs: int) -> NoReturn:
    functorch = getattr(torch._C, "_functorch", None)
    for probe, what in _FUNCTORCH:
        test = getattr(functorch, probe, None)
        if test is not None and test(value):
            raise InputContractError(
                f"{name}: is {what}, a wrapper without memory of its own; the compiled model reads plain memory and has no "
                "batching or autograd rule",
                code="input.storage",
                argument=name,
                expected="a plain tensor with its own memory",
                found=what,
                hint="call the guarded model outside torch.func transforms (loop over the batch, or pass the whole batch "
                "if the contract takes it)",
            )
    if value._is_zerotensor():
        raise InputContractError(
            f"{name}: is a zero tensor (torch._efficientzerotensor): it has no memory for the compiled model to read",
            code="input.storage",
            argument=name,
            expected="a tensor with memory",
            found="zero tensor",
            hint=f"pass torch.zeros_like({name})",
        )
    if nbytes is None:
        why, found, expected = "has no storage the compiled model can read", "no readable storage", "storage behind the view"
    elif nbytes == 0 or not value.data_ptr():
        why, found, expected = f"has a storage of {nbytes} bytes with no memory behind it", "no memory", f"{needs} bytes of memory"
    else:
        view = f"offset {value.storage_offset()}, sizes {tuple(value.shape)}, strides {tuple(value.stride())}"
        why, found, expected = (
            f"is a view ({view}) that reaches byte {needs} of a {nbytes}-byte storage",
            f"{nbytes} bytes",
            f"{needs} bytes",
        )
    raise InputContractError(
        f"{name}: {why}; the compiled model would read past its memory",
        code="input.storage",
        argument=name,
        expected=expected,
        found=found,
        hint=f"pass a tensor whose storage holds the whole view (e.g. {name}.clone() taken before its storage was resized)",
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
            hint=_range_hint(name, i, size, d),
        )
    if d.max is not None and size > d.max:
        raise InputContractError(
            f"{name}: dim {i} is {size}, above the maximum {d.max} of {d.expr!r}",
            code="input.range",
            argument=name,
            expected=f"{d.expr} <= {d.max}",
            found=str(size),
            hint=_range_hint(name, i, size, d),
        )


def _range_hint(name: str, i: int, size: int, d: Dim) -> str:
    """What to do about a size outside the range the package was built for."""
    wanted = f"{min(size, d.min)}..{max(size, d.max) if d.max is not None else ''}"
    accepts = f"{d.min}..{'' if d.max is None else d.max}"
    rebuild = f"--dynamic {name}:{i}={d.expr}:{wanted}" if _symexpr.is_symbol(d.expr) else f"a range for {d.expr} that covers {size}"
    return f"the package accepts {d.expr} in {accepts}; to accept {size}, rebuild it with a wider range ({rebuild})"


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


# -- strides --------------------------------------------------------------------------------------


def _stride_rule(name: str, t: TensorSpec) -> Rule:
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
                hint=_layout_hint(name, tuple(shape), want),
            )

    def check_strides(value: Any, shape: Any, env: Env) -> None:
        got = tuple(value.stride())
        try:
            compare(got, shape, {k: v[0] for k, v in env.symbols.items()})
        except _symexpr.ExprError:
            # a stride over a symbol only a derived size gives (8*s): checked once finish() binds it
            env.defer(name, "strides", lambda values: compare(got, tuple(shape), values))

    return check_strides


def _layout_hint(name: str, shape: tuple[int, ...], want: tuple[int, ...]) -> str:
    """How to give a tensor of ``shape`` the compiled strides ``want``."""
    dense = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        dense[k] = dense[k + 1] * max(shape[k + 1], 1)
    if len(shape) == 4:
        _, c, h, w = (max(v, 1) for v in shape)
        if all(a == b or s <= 1 for a, b, s in zip(want, (h * w * c, 1, w * c, c), shape)):
            return f"the model was compiled for channels_last: pass {name}.contiguous(memory_format=torch.channels_last)"
    if all(a == b or s <= 1 for a, b, s in zip(want, dense, shape)):
        return f"pass {name}.contiguous()"
    return f"copy it into the compiled layout: torch.empty_strided({name}.shape, {want}, dtype={name}.dtype).copy_({name})"


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
