"""A standalone repro for a compiler stage that departs from eager: what a user attaches to a
PyTorch issue.

``OUT.repro/`` beside the package holds the exported program (``torch.export.save``), the failing
sample's inputs (``torch.save`` of ``(args, kwargs)``) and ``repro.py``, which uses plain torch
and nothing of aoti-guard: it compiles the program with ``aoti_compile_and_package`` and the
build's Inductor configs, runs it and ``torch.compile`` of the same program on the inputs, and
compares both with ``ep.module()`` (the stage bisection established that the exported program
agrees with eager). It exits 1 while the difference reproduces.

A repro folder travels (it is attached to an issue), and ``torch.export.load`` runs what a hostile
``program.pt2`` holds (aoti_guard/builder/resolve/saved_program.py says how). The folder's program is this
build's own save of a program that passed ``load_program``; the script, plain torch by design,
forces ``torch.load`` to weights-only (``TORCH_FORCE_WEIGHTS_ONLY_LOAD``), which stops the pickles
but not the expressions and guards: a repro folder from someone else is code, like their model.
"""

from __future__ import annotations

import ast
import os
import shutil
from collections.abc import Mapping
from typing import Any

from aoti_guard.builder.golden import Sample
from aoti_guard.builder.validate.subject import Subject
from aoti_guard.builder.validate.tolerance import OTHER

__all__ = ["MARKER", "repro_dir", "write_repro"]

MARKER = ".aoti-guard-repro"
_NOT_FOR_REPRO = ("aot_inductor.metadata",)  # aoti-guard's own strings: noise in an upstream repro

_SCRIPT = '''"""Standalone repro (written by aoti-guard build; plain torch only).

The AOTInductor package of program.pt2 differs from the exported program on the inputs in
inputs.pt{sample_note}. Run: python repro.py   (exit 1 while the difference reproduces)
"""

import os
import sys
import tempfile

import torch
from torch.utils import _pytree as pytree

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICE = {device!r}
INDUCTOR_CONFIGS = {configs}
TOLERANCE = {tolerance}  # dtype -> (atol, rtol): what the build allowed
DEFAULT_TOLERANCE = TOLERANCE.pop({other!r})  # every other dtype


def tensors(out):
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def compare(name, got, want):
    worst, ok = 0.0, True
    for a, b in zip(tensors(got), tensors(want)):
        atol, rtol = TOLERANCE.get(str(b.dtype).replace("torch.", ""), DEFAULT_TOLERANCE)
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.shape != b.shape:
            print(f"{{name}}: shape {{tuple(a.shape)}} vs {{tuple(b.shape)}}")
            return False
        if a.is_floating_point():
            diff = (a.double() - b.double()).abs()
            worst = max(worst, float(diff.nan_to_num(float("inf")).max()) if diff.numel() else 0.0)
            ok = ok and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol, equal_nan=True))
        else:
            ok = ok and bool(torch.equal(a, b))
    print(f"{{name}}: max |{{name}} - exported program| = {{worst:.6g}} -> {{'agrees' if ok else 'DIFFERS'}}")
    return ok


def main():
    # a repro folder may come from someone else: torch.load takes tensors only (torch reads it per call)
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    ep = torch.export.load(os.path.join(HERE, "program.pt2"))
    args, kwargs = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=True)
    args, kwargs = pytree.tree_map(lambda v: v.to(DEVICE) if isinstance(v, torch.Tensor) else v, (args, kwargs))
    # the package goes in a folder of its own that goes with the run (not left in the temp dir)
    with torch.no_grad(), tempfile.TemporaryDirectory(prefix="aoti-repro-") as scratch:
        expected = ep.module()(*args, **kwargs)
        package = torch._inductor.aoti_compile_and_package(
            ep, package_path=os.path.join(scratch, "repro.pt2"), inductor_configs=dict(INDUCTOR_CONFIGS)
        )
        aoti_ok = compare("aoti", torch._inductor.aoti_load_package(package)(*args, **kwargs), expected)
        try:
            compare("torch.compile", torch.compile(ep.module(), backend="inductor")(*args, **kwargs), expected)
        except Exception as exc:  # the AOTI comparison above is the repro; this one only locates it
            print(f"torch.compile: raised {{type(exc).__name__}}: {{exc}}")
    print("torch", torch.__version__)
    sys.exit(0 if aoti_ok else 1)


if __name__ == "__main__":
    main()
'''


def repro_dir(output: str) -> str:
    """``OUT.repro/`` beside ``OUT.pt2``."""
    return os.path.splitext(os.path.abspath(output))[0] + ".repro"


def _literal_configs(configs: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The configs a Python literal can carry (the rest are named, not silently dropped)."""
    kept, dropped = {}, []
    for key, value in configs.items():
        if key in _NOT_FOR_REPRO:
            continue
        try:
            if ast.literal_eval(repr(value)) == value:
                kept[key] = value
                continue
        except (ValueError, SyntaxError, TypeError):
            pass
        dropped.append(key)
    return kept, dropped


def write_repro(subject: Subject, sample: Sample) -> tuple[str | None, str | None]:
    """Write ``OUT.repro/`` (OUT: ``subject.options.output``) for ``sample``'s inputs; returns
    ``(repro.py path, None)`` or ``(None, why not)``. The script compiles with the subject's
    configs on its device and judges by the build's tolerance (the same atol/rtol per dtype).

    A folder of that name that aoti-guard did not make is left alone."""
    import torch
    from torch.utils import _pytree as pytree

    folder = repro_dir(subject.options.output)
    if os.path.exists(folder) and not os.path.exists(os.path.join(folder, MARKER)):
        return None, f"{folder} exists and was not made by aoti-guard"
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    with open(os.path.join(folder, MARKER), "w", encoding="utf-8") as fh:
        fh.write("made by aoti-guard build; replaced by the next build of the same output\n")
    try:
        torch.export.save(subject.ep, os.path.join(folder, "program.pt2"))
    except Exception as exc:  # noqa: BLE001 - a program torch cannot serialize
        return None, f"torch.export.save failed: {type(exc).__name__}: {str(exc)[:200]}"
    cpu = [v.detach().to("cpu") if isinstance(v, torch.Tensor) else v for v in sample.leaves]
    args, kwargs = pytree.tree_unflatten(cpu, pytree.treespec_loads(subject.contract.in_spec))
    torch.save((tuple(args), dict(kwargs)), os.path.join(folder, "inputs.pt"))
    kept, dropped = _literal_configs(subject.configs)
    note = f" (golden sample {sample.id})" + (f"; configs not carried: {', '.join(dropped)}" if dropped else "")
    script = _SCRIPT.format(
        device=subject.device, configs=repr(kept), tolerance=repr(subject.tolerance.table()), other=OTHER, sample_note=note
    )
    path = os.path.join(folder, "repro.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(script)
    return path, None
