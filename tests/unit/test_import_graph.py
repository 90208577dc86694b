"""The import graph of both packages: no cycles, and runtime_probe never imports aoti_guard.

Every import counts, wherever it stands: at the top, inside a function, or under
``if TYPE_CHECKING:``. A cycle hidden behind a function-level or type-only import is still a cycle
for the reader who follows it. ``from pkg import name`` is an edge to ``pkg.name`` when that is a
module, else to ``pkg`` itself (its ``__init__``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aoti_guard", "runtime_probe")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(name, path.name == "__init__.py", node)
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    targets.append(sub if sub in modules else source)
            for target in targets:
                if target.split(".")[0] in PACKAGES and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle in ``graph`` (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_graph_sees_the_whole_tree() -> None:
    graph = import_graph()
    # a sanity floor so a broken walker cannot pass the checks below vacuously
    assert len(graph) > 60
    assert "runtime_probe.package.archive" in graph["runtime_probe.trust.check"]
    assert "aoti_guard.builder.options" in graph["aoti_guard.builder.pipeline"]


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_runtime_probe_never_imports_aoti_guard() -> None:
    graph = import_graph()
    bad = sorted(
        f"{src} -> {dst}" for src, dsts in graph.items() if src.startswith("runtime_probe") for dst in dsts if dst.startswith("aoti_guard")
    )
    assert bad == []


def test_runtime_probe_imports_only_the_standard_library_at_top_level() -> None:
    # torch and friends are imported inside the functions that need them
    stdlib = set(sys.stdlib_module_names)
    offenders = []
    for name, path in _modules().items():
        if not name.startswith("runtime_probe"):
            continue
        for node in ast.parse(path.read_text()).body:
            roots: list[str] = []
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = [node.module.split(".")[0]]
            offenders += [f"{name}: {r}" for r in roots if r not in stdlib and r != "runtime_probe" and r != "__future__"]
    assert offenders == []


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
