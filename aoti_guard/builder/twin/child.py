"""``python -m aoti_guard.builder.twin.child REQUEST RESULT``: the debug twin compiled from a saved
program, beside the build's release compile (builder/twin/schedule.py says when and why).

REQUEST is the pickle ``twin.start_child`` wrote into the build's private work folder: the saved
(flat) program, the twin's Inductor configs, the output path and the model name. RESULT gets
``{"ok": true}`` or ``{"ok": false, "stage": "load" | "compile", "lines": [...], "hint": ...}``;
a crash leaves it unwritten (the parent reads the exit status and the log). A program that the
child cannot load or compile is compiled again in the build's own process: the child's copy went
through ``torch.export.save``/``load``, which the release model did not.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from typing import Any

__all__ = ["main"]


def _write(path: str, **result: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh)
    os.replace(tmp, path)


def restore_hints(ep: Any) -> list[str]:
    """Give each free symbol of a loaded program the example value the export saw.

    ``torch.export.load`` (2.13) keeps the example sizes of the input dims as hints keyed by their
    expressions (``8*s9 -> 16``), not of the symbols under them (``s9``); Inductor then stops with
    ``LoweringException: ('unexpected None!', 256*s9)`` on a model with a derived dim (a sequence
    that is a multiple of 8, an image side of 32*k). 2.15's load keeps no hint at all, but the
    program keeps its example inputs: each user input's symbolic size against the example's.
    Each such symbol is solved from one of its expressions. Returns what was restored, e.g.
    ``["s9=2"]``.
    """
    import sympy  # type: ignore[import-untyped]

    from runtime_probe.runtime.torch_compat import detect_fake_mode

    fake_mode = detect_fake_mode()([n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"])
    shape_env = getattr(fake_mode, "shape_env", None)
    if shape_env is None:
        return []
    # torch 2.13 renamed the map (the old name still works, with a FutureWarning); 2.11 has the old one
    hints = getattr(shape_env, "backed_var_to_val", None)
    if hints is None:
        hints = shape_env.var_to_val
    restored = []
    for expr, value in [*hints.items(), *_example_sizes(ep)]:
        if isinstance(expr, sympy.Symbol) and expr in hints:
            continue
        unknown = [s for s in expr.free_symbols if s not in hints]
        if len(unknown) != 1:
            continue
        solutions = sympy.solve(sympy.Eq(expr, value), unknown[0])
        if len(solutions) == 1 and getattr(solutions[0], "is_Integer", False):
            hints[unknown[0]] = sympy.Integer(solutions[0])
            restored.append(f"{unknown[0]}={solutions[0]}")
    return restored


def _example_sizes(ep: Any) -> list[tuple[Any, int]]:
    """(symbolic size, the example's size) for every dim of every user input whose size in the
    graph is an expression (``8*s6``, or ``s6`` itself); nothing where the program keeps no example."""
    import sympy
    from torch.utils import _pytree as pytree

    if ep.example_inputs is None:
        return []
    examples = pytree.tree_leaves(tuple(ep.example_inputs))
    users = set(ep.graph_signature.user_inputs)
    nodes = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in users]
    pairs: list[tuple[Any, int]] = []
    if len(nodes) != len(examples):
        return pairs  # not laid out as expected: no guess
    for node, example in zip(nodes, examples):
        fake, sizes = node.meta.get("val"), getattr(example, "shape", None)
        if fake is None or sizes is None or len(getattr(fake, "shape", ())) != len(sizes):
            continue
        for dim, size in zip(fake.shape, sizes):
            expr = getattr(getattr(dim, "node", None), "expr", None)
            if isinstance(expr, sympy.Expr) and expr.free_symbols:
                pairs.append((expr, int(size)))
    return pairs


def main(argv: list[str]) -> int:
    request_path, result_path = argv
    with open(request_path, "rb") as fh:
        request = pickle.load(fh)  # written by this build's own process, in its private work folder
    niceness = int(request.get("nice") or 0)
    if niceness > 0:
        # Below the release compile: on a busy host the release model's compile, which the build
        # waits on first, gets the cores first (the compile pool's workers inherit the niceness).
        os.nice(niceness)
    from aoti_guard.builder.compile.aoti import CompileError, compile_files
    from aoti_guard.builder.resolve.saved_program import load_program
    from aoti_guard.pt2.writer import package_release
    from runtime_probe.runtime import user_modules

    try:
        user_modules.import_from_env()  # the ops the program calls: registered before the load reads them
        ep = load_program(request["program"])
    except Exception as exc:  # noqa: BLE001 - any failure to load is reported, and the parent compiles in-process
        text = str(exc)
        _write(
            result_path,
            ok=False,
            stage="load",
            lines=[f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"],
            hint="the twin is compiled in the build's own process instead",
        )
        return 0
    print("hints restored:", ", ".join(restore_hints(ep)) or "none", flush=True)
    try:
        package_release(request["out"], compile_files(ep, pickle.loads(request["configs"])), request["model_name"])
    except CompileError as exc:
        _write(result_path, ok=False, stage="compile", lines=exc.lines, hint=exc.hint)
        return 0
    _write(result_path, ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
