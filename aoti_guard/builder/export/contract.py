"""The I/O contract of an exported program: named inputs and outputs, dtypes, symbolic shapes with
ranges, strides, devices; and the constants (weights and buffers) with content hashes.

AOTI itself records none of the names or ranges, and numbers inputs by position only; this is what
lets the probe and the guarded loader say "x: dim 0 is 100, above the maximum 64 of 'batch'".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aoti_guard.builder.export.data_checks import read_data_checks
from aoti_guard.builder.export.value_ranges import index_value_ranges
from aoti_guard.builder.resolve.binding import Binding
from runtime_probe.package.manifest import ConstantSpec, Dim, InputSpec, IOContract, OutputSpec, ParamSpec, Symbol, TensorSpec

__all__ = [
    "declared_dim_names",
    "dtype_name",
    "extract_constants",
    "extract_contract",
    "jsonable_value",
    "leaf_name",
    "tied_names",
]


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def jsonable_value(value: Any) -> Any:
    """A non-tensor leaf as JSON (ints, floats, bools, strings, None); others by repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    return repr(value)


def leaf_name(path: Sequence[Any], params: Sequence[ParamSpec]) -> tuple[str, str]:
    """(leaf name, parameter name) for a pytree key path into ``(args, kwargs)``."""
    from torch.utils import _pytree as pytree

    if not path:
        return "input", "input"
    top = path[0]
    rest = pytree.keystr(tuple(path[2:])) if len(path) > 2 else ""
    if getattr(top, "idx", None) == 0 and len(path) > 1:
        idx = int(path[1].idx)
        positional = [p for p in params if p.kind in ("positional_only", "positional_or_keyword")]
        var = next((p for p in params if p.kind == "var_positional"), None)
        if idx < len(positional):
            param = positional[idx].name
            return param + rest, param
        if var is not None:
            return f"{var.name}[{idx - len(positional)}]{rest}", var.name
        return f"arg{idx}{rest}", f"arg{idx}"
    if getattr(top, "idx", None) == 1 and len(path) > 1:
        key = str(path[1].key)
        return key + rest, key
    return pytree.keystr(tuple(path)), "input"


def _symbol_names(
    dynamic_shapes: Any, args: Sequence[Any], kwargs: Mapping[str, Any], params: Sequence[ParamSpec]
) -> tuple[dict[str, dict[int, str]], dict[str, dict[int, str]]]:
    """Leaf name -> {dim index: user Dim name}, read off the user's dynamic_shapes (best effort).

    The second mapping holds derived dims (``8 * Dim("seq8")``): leaf -> {dim: root Dim name}, so
    the free symbol under ``8*s9`` can be named ``seq8``.
    """
    out: dict[str, dict[int, str]] = {}
    roots: dict[str, dict[int, str]] = {}
    if dynamic_shapes is None:
        return out, roots
    import torch

    def walk(value: Any, spec: Any, name: str) -> None:
        if spec is None:
            return
        if isinstance(value, torch.Tensor):
            items = spec.items() if isinstance(spec, Mapping) else enumerate(spec) if isinstance(spec, (list, tuple)) else []
            for dim, d in items:
                dname = getattr(d, "__name__", None)
                if isinstance(dim, int) and isinstance(dname, str) and re.match(r"^[A-Za-z_]\w*$", dname) and not hasattr(d, "root"):
                    out.setdefault(name, {})[dim] = dname
                root = getattr(getattr(d, "root", None), "__name__", None)
                if isinstance(dim, int) and isinstance(root, str) and re.match(r"^[A-Za-z_]\w*$", root):
                    roots.setdefault(name, {})[dim] = root
        elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
            for i, (v, s) in enumerate(zip(value, spec)):
                walk(v, s, f"{name}[{i}]")
        elif isinstance(value, Mapping) and isinstance(spec, Mapping):
            for k, v in value.items():
                walk(v, spec.get(k), f"{name}[{k!r}]")
        elif isinstance(spec, (list, tuple)):
            # a library pytree type (a DynamicCache) given by the list of its flattened leaves' specs,
            # as torch.export takes it: pair them in flattening order, as torch does
            from torch.utils import _pytree as pytree

            leaves = pytree.tree_flatten_with_path(value)[0]
            specs = pytree.tree_flatten(spec, is_leaf=lambda s: s is None or isinstance(s, Mapping))[0]
            if len(leaves) == len(specs):
                for (path, v), s in zip(leaves, specs):
                    walk(v, s, name + pytree.keystr(path))

    named = {p.name: p for p in params}
    positional = [p for p in params if p.kind in ("positional_only", "positional_or_keyword")]
    bound: dict[str, Any] = {}
    for i, a in enumerate(args):
        bound[positional[i].name if i < len(positional) else f"arg{i}"] = a
    bound.update(kwargs)
    if isinstance(dynamic_shapes, Mapping):
        for key, spec in dynamic_shapes.items():
            if key in bound:
                walk(bound[key], spec, key)
    elif isinstance(dynamic_shapes, (list, tuple)):
        values = list(bound.items())
        for (key, value), spec in zip(values, dynamic_shapes):
            walk(value, spec, key)
    del named
    return out, roots


def declared_dim_names(binding: Binding, args: Sequence[Any], kwargs: Mapping[str, Any], dynamic_shapes: Any) -> dict[str, dict[int, str]]:
    """Leaf name -> {dim index: the name of the user's ``Dim``}, as the user's dynamic_shapes
    declare them: two dims given one ``Dim`` share its name; ``Dim.DYNAMIC``/``Dim.AUTO`` and
    derived dims (``8 * Dim("s")``) have none."""
    return _symbol_names(dynamic_shapes, args, kwargs, binding.params)[0]


def _expr(value: Any, rename: Mapping[str, str]) -> int | str:
    if isinstance(value, int):
        return value
    text = str(value.node.expr if hasattr(value, "node") else value)
    if not rename:
        return text
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: rename.get(m.group(0), m.group(0)), text)


def extract_contract(
    ep: Any, args: Sequence[Any], kwargs: Mapping[str, Any], binding: Binding, *, dynamic_shapes: Any = None, eager_outputs: Any = None
) -> IOContract:
    """Build the I/O contract from an ExportedProgram and the example inputs it was exported with;
    ``binding``: the example bound to the model's signature (``binding.bind``, once per build)."""
    import torch
    from torch.utils import _pytree as pytree

    params = binding.params
    in_spec = ep.call_spec.in_spec
    ordered_kwargs = {k: kwargs[k] for k in spec_kwarg_order(in_spec, kwargs)}
    leaves = pytree.tree_flatten_with_path((tuple(args), ordered_kwargs))[0]
    user_specs, fake_vals = _user_inputs(ep)
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    tensor_leaves = [(leaf_name(path, params)[0], v) for path, v in leaves if isinstance(v, torch.Tensor)]
    fake_tensors: list[Any] = [v for v in fake_vals if isinstance(v, torch.Tensor)]
    rename = _renames(tensor_leaves, fake_tensors, _symbol_names(dynamic_shapes, args, kwargs, params), ranges)
    implied = _implied_root_ranges(fake_tensors, ranges)
    dim_of = _dim_reader(ep, ranges, implied, rename)
    by_placeholder = index_value_ranges(ep)
    value_ranges = [by_placeholder.get(getattr(s.arg, "name", "")) for s in user_specs]
    inputs, sources = _inputs(leaves, params, fake_tensors, value_ranges, dim_of, rename)
    symbols = []
    for sym, vr in sorted(ranges.items()):
        if not re.match(r"^[A-Za-z_]\w*$", sym):
            continue  # a derived size's own range (``8*s9``): its free symbol is listed, the size follows from it
        name = rename.get(sym, sym)
        lo, hi = implied.get(sym, (vr.lower, vr.upper))
        symbols.append(Symbol(name, _bound(lo, 0) or 0, _bound(hi, None), tuple(sources.get(name, []))))
    outputs = _outputs(ep, eager_outputs, dim_of, lambda s: _expr(s, rename))
    contract = IOContract(
        params=tuple(params),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        symbols=tuple(symbols),
        in_spec=pytree.treespec_dumps(in_spec),
        out_spec=pytree.treespec_dumps(ep.call_spec.out_spec),
    )
    return read_data_checks(ep, contract)  # the model's checks on input values (x.item())


def _user_inputs(ep: Any) -> tuple[list[Any], list[Any]]:
    """The program's user-input specs and each one's fake value (None where the graph has none)."""
    import torch

    user_nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    user_specs = [s for s in ep.graph_signature.input_specs if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    fake_vals: list[Any] = []
    for s in user_specs:
        node = user_nodes.get(getattr(s.arg, "name", ""))
        fake_vals.append(node.meta.get("val") if node is not None else None)
    return user_specs, fake_vals


def _renames(
    tensor_leaves: Sequence[tuple[str, Any]],
    fake_tensors: Sequence[Any],
    names: tuple[dict[str, dict[int, str]], dict[str, dict[int, str]]],
    ranges: Mapping[str, Any],
) -> dict[str, str]:
    """Export's symbol -> the user's dim name (``names``: the declared names and the roots of
    derived dims, per input and dim), each symbol and each name taken once."""
    import torch

    dim_names, root_names = names
    rename: dict[str, str] = {}
    for (name, _example), fake in zip(tensor_leaves, fake_tensors):
        for dim, size in enumerate(fake.shape):
            if not isinstance(size, torch.SymInt):
                continue
            sym = str(size.node.expr)
            user = dim_names.get(name, {}).get(dim)
            if user and sym in ranges and sym not in rename and user not in rename.values():
                rename[sym] = user
            root = root_names.get(name, {}).get(dim)
            free = sorted(str(f) for f in size.node.expr.free_symbols)
            if root and len(free) == 1 and free[0] in ranges and free[0] not in rename and root not in rename.values():
                rename[free[0]] = root
    return rename


def _dim_reader(ep: Any, ranges: Mapping[str, Any], implied: Mapping[str, Any], rename: Mapping[str, str]) -> Callable[[Any], int | Dim]:
    """A size as the contract records it: an int, or a Dim with the user's names and its range."""
    import torch
    from torch.utils._sympy.value_ranges import bound_sympy

    def dim_of(size: Any) -> int | Dim:
        if not isinstance(size, torch.SymInt):
            return int(size)
        expr = size.node.expr
        vr = ranges.get(str(expr))
        if vr is None:
            vr = bound_sympy(expr, dict(ep.range_constraints))
        lo, hi = implied.get(str(expr), (vr.lower, vr.upper))
        return Dim(str(_expr(size, rename)), _bound(lo, 0) or 0, _bound(hi, None))

    return dim_of


def _inputs(
    leaves: Sequence[tuple[Any, Any]],
    params: Sequence[Any],
    fake_tensors: Sequence[Any],
    value_ranges: Sequence[Any],
    dim_of: Callable[[Any], int | Dim],
    rename: Mapping[str, str],
) -> tuple[list[InputSpec], dict[str, list[str]]]:
    """One InputSpec per leaf (a tensor's shape, stride and value range from export's fake
    value), and, per symbol, the input dims that carry it (``x.shape[0]``)."""
    import torch

    inputs: list[InputSpec] = []
    sources: dict[str, list[str]] = {}
    tensor_index = 0
    fake_iter = iter(fake_tensors)
    for path, value in leaves:
        name, param = leaf_name(path, params)
        if not isinstance(value, torch.Tensor):
            inputs.append(InputSpec(name, param, "constant", None, None, jsonable_value(value)))
            continue
        fake = next(fake_iter, None)
        shape = tuple(dim_of(s) for s in (fake.shape if fake is not None else value.shape))
        for d, s in enumerate(shape):
            if isinstance(s, Dim) and re.match(r"^[A-Za-z_]\w*$", s.expr):
                sources.setdefault(s.expr, []).append(f"{name}.shape[{d}]")
        tensor = TensorSpec(
            dtype=dtype_name(value.dtype),
            shape=shape,
            stride=tuple(_expr(s, rename) for s in (fake.stride() if fake is not None else value.stride())),
            contiguous=bool(value.is_contiguous()),
            device=value.device.type,
            value_range=value_ranges[tensor_index] if tensor_index < len(value_ranges) else None,
        )
        inputs.append(InputSpec(name, param, "tensor", tensor_index, tensor))
        tensor_index += 1
    return inputs, sources


def _bound(value: Any, default: int | None) -> int | None:
    """A range bound as an int, ``default`` where it is infinite. torch's ``int_oo`` (the upper
    bound of every unbounded dim: ``Dim.DYNAMIC``, ``Dim("b", min=2)``) says ``is_finite`` True
    under sympy 1.14, and ``int()`` of it raises: only a sympy Integer is a bound."""
    return int(value) if getattr(value, "is_Integer", False) or isinstance(value, int) else default


def _implied_root_ranges(fake_tensors: Sequence[Any], ranges: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The range a free symbol really has when no input's size is the symbol itself, only sizes
    derived from it (``8*s9``): the values that put every such size within its own range.

    torch.export keeps the derived size's range as asked (``8*s9`` in [8, 64] for
    ``8 * Dim("seq8", min=1, max=8)``) but gives the symbol alone the 0/1-specialized [2, 8]. Both
    torch's runtime input checks and the guarded loader check the sizes, so ``seq8 = 1`` (an input
    of 8) is accepted; the golden samples must go there too, not stop at 2 and call that the
    minimum. A symbol some input takes directly keeps its own range: that size is checked against it.
    """
    import sympy  # type: ignore[import-untyped]
    import torch

    direct: set[str] = set()
    bounds: dict[str, tuple[Any, Any]] = {}
    for fake in fake_tensors:
        for size in fake.shape:
            if not isinstance(size, torch.SymInt):
                continue
            expr = size.node.expr
            if isinstance(expr, sympy.Symbol):
                direct.add(str(expr))
                continue
            free = list(expr.free_symbols)
            vr = ranges.get(str(expr))
            if len(free) != 1 or vr is None or not (vr.lower.is_Integer and vr.upper.is_Integer):
                continue
            sym = free[0]
            a, b = expr.coeff(sym), expr.subs(sym, 0)
            if not (a.is_Integer and b.is_Integer and int(a) > 0 and sympy.expand(a * sym + b - expr) == 0):
                continue  # not a*s + b: its range says nothing simple about s
            lo = -((-(int(vr.lower) - int(b))) // int(a))  # ceil
            hi = (int(vr.upper) - int(b)) // int(a)
            old = bounds.get(str(sym))
            bounds[str(sym)] = (lo, hi) if old is None else (max(old[0], lo), min(old[1], hi))
    out = {}
    for sym, (lo, hi) in bounds.items():
        vr = ranges.get(sym)
        if sym in direct or vr is None or lo > hi:
            continue
        if (lo, hi) != (vr.lower, vr.upper):
            out[sym] = (sympy.Integer(lo), sympy.Integer(hi))
    return out


def spec_kwarg_order(in_spec: Any, kwargs: Mapping[str, Any]) -> list[str]:
    """The kwargs order the exported program flattens in (torch's reorder_kwargs)."""
    try:
        kwargs_spec = in_spec.child(1) if hasattr(in_spec, "child") else in_spec.children_specs[1]  # newer torch renamed it
        context = kwargs_spec.context
        order = [k for k in context if k in kwargs]
        return order + [k for k in kwargs if k not in order]
    except (AttributeError, IndexError, TypeError):
        return list(kwargs)


def _outputs(ep: Any, eager_outputs: Any, dim_of: Any, stride_of: Callable[[Any], int | str]) -> list[OutputSpec]:
    import torch
    from torch.utils import _pytree as pytree

    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    user_names = list(ep.graph_signature.user_outputs)
    vals = []
    graph_outs = list(out_node.args[0])
    n_mut = len(graph_outs) - len(user_names)
    for a in graph_outs[n_mut:]:
        vals.append(a.meta.get("val") if hasattr(a, "meta") else a)
    if eager_outputs is not None:
        names = [output_leaf_name(p) for p, _ in pytree.tree_flatten_with_path(eager_outputs)[0]]
    else:
        names = ["output"] if len(vals) == 1 else [f"output[{i}]" for i in range(len(vals))]
    outs = []
    for i, v in enumerate(vals):
        name = names[i] if i < len(names) else f"output[{i}]"
        if isinstance(v, torch.Tensor):
            spec = TensorSpec(
                dtype=dtype_name(v.dtype),
                shape=tuple(dim_of(s) for s in v.shape),
                stride=tuple(stride_of(s) for s in v.stride()),
                contiguous=True,
                device=v.device.type,
            )
            outs.append(OutputSpec(name, spec))
        else:
            outs.append(OutputSpec(name, None, jsonable_value(v)))
    return outs


def output_leaf_name(path: Sequence[Any]) -> str:
    """The manifest's name of one output leaf.

    A model returning a mapping, a dataclass or a library output type (a Hugging Face
    ``ModelOutput``, a cache) names its leaves by their path: ``last_hidden_state``,
    ``past_key_values.0.key``. A tensor, tuple or list keeps the positional form: ``output``,
    ``output[1]``, ``output[1][0]``.
    """
    from torch.utils import _pytree as pytree

    if not path:
        return "output"
    if isinstance(path[0], pytree.SequenceKey):
        return "output" + pytree.keystr(tuple(path))
    parts = []
    for key in path:
        if isinstance(key, pytree.MappingKey):
            parts.append(str(key.key))
        elif isinstance(key, pytree.GetAttrKey):
            parts.append(key.name)
        elif isinstance(key, pytree.SequenceKey):
            parts.append(str(key.idx))
        else:
            parts.append(str(key).strip(".[]'\""))
    return ".".join(parts)


def tensor_sha256(t: Any) -> str:
    """SHA-256 of the tensor's row-major little-endian bytes: the bytes a safetensors file holds,
    so the probe can hash a weights file with the standard library and compare."""
    from runtime_probe.formats.safetensors import tensor_bytes

    return hashlib.sha256(tensor_bytes(t)).hexdigest()


def extract_constants(
    ep: Any,
    runtime_constants: Mapping[str, str],
    renamed: Mapping[str, str] | None = None,
    unpaired: Mapping[str, Mapping[str, Any]] | None = None,
    digest_of: Callable[[str, Any], str] | None = None,
) -> list[ConstantSpec]:
    """Every weight/buffer/constant of the program; ``runtime_constants`` maps the package's
    name -> AOTI's internal name for those it keeps as replaceable runtime constants.
    ``renamed``: program FQN -> the package's name, for constants the compiler renamed (paired by
    value: builder/compile/constant_names.py); ``unpaired``: the package's constants no program constant
    matched ({name: digest}), recorded under the package's name so the manifest lists them all.
    ``digest_of(fqn, tensor)``: the SHA-256 of a constant (default ``tensor_sha256``; the build hands
    in those it took while the release model compiled, builder/compile/constant_digests.py)."""
    renamed = renamed or {}
    tensors, kinds = _program_constants(ep)
    sig = ep.graph_signature
    # what a checkpoint holds: state_dict() has the parameters and persistent buffers, never a
    # non-persistent buffer (ep.constants has those) or a lifted tensor constant
    in_state_dict = set(ep.state_dict) - set(getattr(sig, "non_persistent_buffers", ()) or ())
    tied = tied_names(tensors)
    out = []
    for fqn, t in tensors.items():
        name = renamed.get(fqn, fqn)
        out.append(
            ConstantSpec(
                fqn=fqn,
                kind=kinds.get(fqn, "constant"),
                dtype=dtype_name(t.dtype),
                shape=tuple(int(s) for s in t.shape),
                sha256=digest_of(fqn, t) if digest_of is not None else tensor_sha256(t),
                nbytes=int(t.numel() * t.element_size()),
                storage="package" if name in runtime_constants else "inlined",
                internal_name=runtime_constants.get(name),
                runtime_fqn=name if name != fqn else None,
                in_state_dict=fqn in in_state_dict,
                tied_with=tied.get(fqn, ()),
            )
        )
    return out + _unpaired_constants(unpaired or {}, runtime_constants)


def _program_constants(ep: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The program's tensors by FQN (parameters, buffers, lifted constants) and each one's kind."""
    import torch

    sig = ep.graph_signature
    kinds: dict[str, str] = {}
    for fqn in sig.parameters:
        kinds[fqn] = "parameter"
    for fqn in sig.buffers:
        kinds[fqn] = "buffer"
    tensors: dict[str, Any] = {fqn: t for fqn, t in ep.state_dict.items() if isinstance(t, torch.Tensor)}
    for fqn, value in ep.constants.items():
        if isinstance(value, torch.Tensor):
            tensors[fqn] = value
            kinds.setdefault(fqn, "constant")
    return tensors, kinds


def _unpaired_constants(unpaired: Mapping[str, Mapping[str, Any]], runtime_constants: Mapping[str, str]) -> list[ConstantSpec]:
    """The package's constants no program constant matched, under the package's name."""
    return [
        ConstantSpec(
            fqn=name,
            kind="constant",
            dtype=str(digest.get("dtype")),
            shape=tuple(int(n) for n in digest.get("shape") or ()),
            sha256=str(digest.get("sha256")),
            nbytes=int(digest.get("nbytes") or 0),  # measured in the child, beside the hash
            storage="package" if name in runtime_constants else "inlined",
            internal_name=runtime_constants.get(name),
            in_state_dict=False,  # made by the compiler: no checkpoint holds it
        )
        for name, digest in sorted(unpaired.items())
    ]


def tied_names(tensors: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """FQN -> the other FQNs of the same tensor (tied weights: ``lm_head.weight`` is
    ``model.embed_tokens.weight``). The same tensor is the same storage, offset, shape, strides
    and dtype: two views of different parts of one storage are not tied. Empty tensors (no
    storage to share) are never tied."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for fqn, t in tensors.items():
        if not hasattr(t, "untyped_storage") or t.numel() == 0:
            continue
        key = (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        groups.setdefault(key, []).append(fqn)
    return {fqn: tuple(n for n in names if n != fqn) for names in groups.values() if len(names) > 1 for fqn in names}
