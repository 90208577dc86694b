"""No product function over 60 lines or with more than 6 parameters (issue 41).

A function's lines are ``end_lineno - lineno + 1`` (its docstring and comments included); its
parameters are every named one except ``self`` and ``cls``, and ``*args`` and ``**kwargs`` count one
each. Arguments that travel together go into a small frozen dataclass defined next to their use (a
value object counts as one parameter); a long function is split along its own stages into named
helpers.

``ALLOWED`` lists the exceptions, each with its reason: a public signature users call with its
keywords (changing it would break them). An entry
that no longer matches a violation fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aoti_guard", "runtime_probe")
MAX_LINES = 60
MAX_PARAMS = 6

# "module:qualified name" -> why it may stay as it is
ALLOWED: dict[str, str] = {}  # runtime_probe.load was the last: its options are one LoadOptions now (PEP 692)

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, _Function]]:
    """Every function of ``tree`` with its qualified name (``Class.method``, ``outer.inner``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def parameter_count(fn: _Function) -> int:
    a = fn.args
    named = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs) if p.arg not in ("self", "cls")]
    return len(named) + (a.vararg is not None) + (a.kwarg is not None)


def line_count(fn: _Function) -> int:
    return (fn.end_lineno or fn.lineno) - fn.lineno + 1


def violations(root: Path = ROOT) -> dict[str, str]:
    """``module:function`` -> what it breaks, for every function of the product packages."""
    found: dict[str, str] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            for name, fn in _functions(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                lines, params = line_count(fn), parameter_count(fn)
                broken = [f"{lines} lines"] * (lines > MAX_LINES) + [f"{params} parameters"] * (params > MAX_PARAMS)
                if broken:
                    found[f"{'.'.join(parts)}:{name}"] = f"{', '.join(broken)} ({path.relative_to(root)}:{fn.lineno})"
    return found


def test_no_function_over_60_lines_or_6_parameters() -> None:
    new = {key: what for key, what in violations().items() if key not in ALLOWED}
    assert not new, (
        f"functions over {MAX_LINES} lines or {MAX_PARAMS} parameters: split each along its stages into named helpers, and "
        "pass arguments that travel together as one small frozen dataclass:\n" + "\n".join(f"  {k}: {v}" for k, v in sorted(new.items()))
    )


def test_every_allowed_exception_is_still_one() -> None:
    found = violations()
    stale = sorted(key for key in ALLOWED if key not in found)
    assert not stale, "these functions are no longer too long or too wide (or were moved): remove them from ALLOWED:\n" + "\n".join(
        f"  {k}" for k in stale
    )


def test_the_scan_counts_as_the_rule_says(tmp_path: Path) -> None:
    """Lines from ``def`` to the last line; self/cls not counted; *args and **kwargs one each;
    methods and nested functions named by their qualified names."""
    pkg = tmp_path / "runtime_probe"
    pkg.mkdir()
    (tmp_path / "aoti_guard").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES - 1))
    (pkg / "m.py").write_text(
        f"def long():\n{body}\n\n"  # 60 lines: allowed
        f"def longer():\n{body}\n    x = 0\n\n"  # 61 lines
        "class C:\n"
        "    def ok(self, a, b, c, d, e, f): ...\n"
        "    def wide(self, a, b, c, d, e, *args, **kwargs): ...\n"
        "def outer():\n"
        "    def inner(a, b, c, d, e, f, /, *, g): ...\n"
    )
    found = violations(tmp_path)
    assert set(found) == {"runtime_probe.m:longer", "runtime_probe.m:C.wide", "runtime_probe.m:outer.inner"}, found
    assert found["runtime_probe.m:longer"].startswith("61 lines") and found["runtime_probe.m:C.wide"].startswith("7 parameters")
