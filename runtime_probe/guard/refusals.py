"""Why an input is refused, in words: the errors and hints of the rules in rules.py that need more
than a line to say it (a subclass, a layout, a lazy flag, memory the view does not have, a size
outside the package's range, a layout the compiled code does not read)."""

from __future__ import annotations

from typing import Any, NoReturn

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim
from runtime_probe.reporting.errors import InputContractError

__all__ = ["layout_hint", "range_hint", "refuse_flags", "refuse_layout", "refuse_storage", "refuse_subclass"]


def refuse_subclass(name: str, value: Any) -> None:
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    raise InputContractError(
        f"{name}: is a {type(value).__name__}, a torch.Tensor subclass; the compiled model reads the raw memory of plain tensors only",
        code="input.subclass",
        argument=name,
        expected="torch.Tensor (or nn.Parameter)",
        found=kind[:120],
        hint="pass a plain dense tensor holding the data (a FakeTensor or wrapper subclass has none the model can read)",
    )


def refuse_layout(name: str, value: Any) -> None:
    found = "nested" if value.is_nested else str(value.layout).replace("torch.", "").lstrip("_")
    raise InputContractError(
        f"{name}: is a {found} tensor, the model was compiled for a dense (strided) tensor",
        code="input.layout",
        argument=name,
        expected="strided",
        found=found,
        hint=f"pass {name}.to_dense()" if found != "nested" else "pass a dense tensor (e.g. the padded batch)",
    )


def refuse_flags(name: str, value: Any) -> None:
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


_FUNCTORCH = (
    ("is_batchedtensor", "a BatchedTensor (inside torch.func.vmap)"),
    ("is_gradtrackingtensor", "a GradTrackingTensor (inside torch.func.grad, jacrev, vjp...)"),
    ("is_functionaltensor", "a FunctionalTensor (inside torch.func.functionalize)"),
)


def refuse_storage(name: str, value: Any, torch: Any, nbytes: int | None, needs: int) -> NoReturn:
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


def range_hint(name: str, i: int, size: int, d: Dim) -> str:
    """What to do about a size outside the range the package was built for."""
    wanted = f"{min(size, d.min)}..{max(size, d.max) if d.max is not None else ''}"
    accepts = f"{d.min}..{'' if d.max is None else d.max}"
    rebuild = f"--dynamic {name}:{i}={d.expr}:{wanted}" if _symexpr.is_symbol(d.expr) else f"a range for {d.expr} that covers {size}"
    return f"the package accepts {d.expr} in {accepts}; to accept {size}, rebuild it with a wider range ({rebuild})"


def layout_hint(name: str, shape: tuple[int, ...], want: tuple[int, ...]) -> str:
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
