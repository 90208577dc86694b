"""The callable around torch's C++ package loader, without importing Inductor.

torch's own wrapper, ``torch.export.pt2_archive._package.AOTICompiledModel``, lives in a module
that imports ``torch._inductor`` (for one path helper), the export serializer and fake tensors:
~1 CPU-second on top of ``import torch``'s ~1.2, in every process that loads a package (a serving
process's ``runtime_probe.load``, the probe's child, the build's validation child), none of which
compiles anything (docs/benchmarks.md, "Loading without Inductor"). ``CompiledModel`` is that
wrapper's behaviour over the same loader, written against the loader's binding, which is the
same on torch 2.11 to 2.15 for what is used here (``torch_compat`` resolves the loader; the
compat table in docs/compat.md lists both).

Standard library only at import time (runtime_probe's rule): torch is imported when it is called.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CompiledModel"]


class CompiledModel:
    """What ``AOTICompiledModel`` does, over ``loader`` (a ``torch._C._aoti.AOTIModelPackageLoader``):
    a call flattens the arguments by the package's input spec, runs, and rebuilds the outputs."""

    def __init__(self, loader: Any, reorder_kwargs: Any) -> None:
        self.loader = loader
        self._reorder_kwargs = reorder_kwargs  # torch_compat.reorder_kwargs(), handed in: no import cycle

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # as torch's __call__: the specs are parsed on every call (the guarded model's fast path
        # parses them once, runtime_probe/guard/load.py)
        import torch
        import torch.utils._pytree as pytree

        call_spec = self.loader.get_call_spec()
        in_spec = pytree.treespec_loads(call_spec[0])
        out_spec = pytree.treespec_loads(call_spec[1])
        flat_inputs = pytree.tree_flatten((args, self._reorder_kwargs(kwargs, in_spec)))[0]
        flat_inputs = [x for x in flat_inputs if isinstance(x, torch.Tensor)]
        flat_outputs = self.loader.boxed_run(flat_inputs)
        return pytree.tree_unflatten(flat_outputs, out_spec)

    def get_metadata(self) -> dict[str, str]:
        return dict(self.loader.get_metadata())

    def get_constant_fqns(self) -> list[str]:
        return list(self.loader.get_constant_fqns())

    def load_constants(
        self, constants_map: dict[str, Any], *, check_full_update: bool, user_managed: bool = False, allow_h2d_copy: bool = False
    ) -> None:
        """The constants into the active buffer (``use_inactive`` False), as torch's wrapper does.
        Each of ``user_managed`` and ``allow_h2d_copy`` reaches the loader only when set: 2.11's
        binding has no ``allow_h2d_copy`` at all (GPU run 22), so passing it False failed there."""
        extra = {name: True for name, on in (("user_managed", user_managed), ("allow_h2d_copy", allow_h2d_copy)) if on}
        self.loader.load_constants(constants_map, False, check_full_update, **extra)

    def __deepcopy__(self, memo: dict[int, Any] | None) -> CompiledModel:
        """A copy shares the loaded native model, as torch's does (its weights included)."""
        return CompiledModel(self.loader, self._reorder_kwargs)
