"""User GPU code in the exported program: custom ops and user Triton kernels, read off the graph.

A ``torch.library.custom_op`` or ``triton_op`` is a node whose target is an ``OpOverload`` of a
namespace that is not torch's own (``mylib::scale``); a Triton kernel called through
``wrap_triton`` / ``capture_triton`` is a ``triton_kernel_wrapper_*`` higher-order node. Their
memory accesses are the user's: eager runs the same kernel, so an out-of-bounds read compares
equal at build time (issue 43). The build runs memcheck on such a program (validate/run.py), and
the manifest records what it found (``Manifest.user_code``) so that a probe does the same.
"""

from __future__ import annotations

from typing import Any

from runtime_probe.package.manifest import UserCode

__all__ = ["TORCH_NAMESPACES", "scan"]

# op namespaces of torch itself (and of Inductor's own lowering helpers): not user code
TORCH_NAMESPACES = frozenset(
    {
        "aten",
        "prims",
        "prim",
        "rngprims",
        "quantized",
        "quantized_decomposed",
        "_quantized",
        "_c10d_functional",
        "c10d_functional",
        "_c10d_functional_autograd",
        "_dtensor",
        "profiler",
        "inductor",
        "higher_order",
        "debugprims",
        "symm_mem",
        "_higher_order_ops",
    }
)
_TRITON_WRAPPERS = ("triton_kernel_wrapper_functional", "triton_kernel_wrapper_mutation")


def scan(ep: Any) -> UserCode:
    """The custom ops and user Triton kernels of ``ep``'s graph (its submodules' too), each once."""
    ops: dict[str, None] = {}
    kernels: dict[str, None] = {}
    for module in ep.graph_module.modules():
        graph = getattr(module, "graph", None)
        if graph is None:
            continue
        for node in graph.nodes:
            if node.op != "call_function":
                continue
            name = _custom_op(node.target)
            if name is not None:
                ops[name] = None
            kernel = _triton_kernel(node)
            if kernel is not None:
                kernels[kernel] = None
    return UserCode(tuple(ops), tuple(kernels))


def _custom_op(target: Any) -> str | None:
    """``namespace::name`` of a user op (an OpOverload outside torch's namespaces), else None."""
    namespace = getattr(target, "namespace", None)
    schema = getattr(target, "_schema", None)
    if not isinstance(namespace, str) or schema is None or namespace in TORCH_NAMESPACES:
        return None
    return str(schema.name)


def _triton_kernel(node: Any) -> str | None:
    """The kernel's name of a user Triton kernel's wrapper node, else None."""
    if getattr(node.target, "__name__", getattr(node.target, "name", None)) not in _TRITON_WRAPPERS:
        name = str(getattr(node.target, "_name", ""))
        if name not in _TRITON_WRAPPERS:
            return None
    index = node.kwargs.get("kernel_idx")
    try:
        from runtime_probe.runtime.torch_compat import triton_kernel_side_table

        kernel = triton_kernel_side_table().get_kernel(index)
        fn = getattr(kernel, "fn", kernel)
        return str(getattr(fn, "__name__", f"kernel {index}"))
    except Exception:  # noqa: BLE001 - the table is torch's private state: the node is still a user kernel
        return f"triton kernel {index}"
