"""The import graph of both packages: no cycles, and runtime_probe never imports aoti_guard.

Every import counts, wherever it stands: at the top, inside a function, or under
``if TYPE_CHECKING:``. A cycle hidden behind a function-level or type-only import is still a cycle
for the reader who follows it. ``from pkg import name`` is an edge to ``pkg.name`` when that is a
module, else to ``pkg`` itself (its ``__init__``).

The same holds one level up, for folders (``folder_graph``): ``runtime_probe.child`` may import
``runtime_probe.ladder`` or the other way round, never both, so each folder can be read (and moved)
knowing only the folders below it. A folder is a package with no packages inside it
(``runtime_probe/child/``, ``runtime_probe/reporting/``, and each step of the build:
``aoti_guard/builder/export/``, ``aoti_guard/builder/validate/``...). A module directly inside a
package that holds folders (``runtime_probe/cli.py``, ``aoti_guard/cli.py``,
``aoti_guard/builder/pipeline.py``) and that package's ``__init__`` are each a node of their own: they
are leaves everyone imports (``options``, ``state``) or entry points that import everyone (``cli``,
``pipeline``), and lumping them into one node would join the two into a loop through every folder.
"""

from __future__ import annotations

import ast
import functools
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aoti_guard", "runtime_probe")


@functools.cache  # the tree does not change during a run; folder_of asks once per edge
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


def folder_of(module: str) -> str:
    """The folder node of ``module``: the package with no packages inside it that holds it, else the module itself."""
    if _is_package(module):
        return module
    parent = module.rsplit(".", 1)[0]
    return module if _has_subpackages(parent) else parent


def _is_package(module: str) -> bool:
    return _modules()[module].name == "__init__.py"


@functools.cache
def _has_subpackages(package: str) -> bool:
    return any(name.startswith(package + ".") and _is_package(name) for name in _modules())


def _import_lines(module: str, path: Path) -> dict[str, int]:
    """The first line at which ``module`` imports each in-tree target (as ``import_graph`` resolves it)."""
    modules = _modules()
    lines: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, path.name == "__init__.py", node)
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        for target in targets:
            lines[target] = min(lines.get(target, node.lineno), node.lineno)
    return lines


def folder_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    """The folder graph, and for each of its edges the imports that make it (``module:line -> target``)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], list[str]] = {}
    for src, dsts in import_graph().items():
        a = folder_of(src)
        graph.setdefault(a, set())
        lines = _import_lines(src, modules[src])
        for dst in sorted(dsts):
            b = folder_of(dst)
            if a != b:
                graph[a].add(b)
                why.setdefault((a, b), []).append(f"{src}:{lines.get(dst, 0)} -> {dst}")
    return graph, why


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


def test_folder_graph_sees_the_folders() -> None:
    graph, why = folder_graph()
    assert folder_of("runtime_probe.child.worker") == "runtime_probe.child"
    assert folder_of("runtime_probe.child") == "runtime_probe.child"
    # each step of the build is a folder of its own; the pipeline and its leaves are nodes of their own
    assert folder_of("aoti_guard.builder.validate.run") == "aoti_guard.builder.validate"
    # (the export folder's name is spelt from a module in it: the one-off relayout script rewrote the
    # old module of that name wherever it appeared)
    export = "aoti_guard.builder.export.hints".rsplit(".", 1)[0]
    assert folder_of("aoti_guard.builder.export.hints") == export
    assert folder_of("aoti_guard.builder.pipeline") == "aoti_guard.builder.pipeline"
    assert folder_of("aoti_guard.builder") == "aoti_guard.builder"
    assert folder_of("runtime_probe.reporting.paths") == "runtime_probe.reporting"
    assert folder_of("runtime_probe.cli") == "runtime_probe.cli"
    assert export in graph["aoti_guard.builder.pipeline"]
    assert folder_of("runtime_probe") == "runtime_probe"
    assert "runtime_probe.child" in graph["runtime_probe.ladder"]
    assert any(line.startswith("runtime_probe.ladder.steps:") for line in why[("runtime_probe.ladder", "runtime_probe.child")])


def test_no_folder_import_cycles() -> None:
    graph, why = folder_graph()
    cycle = find_cycle(graph)
    if cycle is not None:
        edges = [f"{a} -> {b}:\n    " + "\n    ".join(why[(a, b)]) for a, b in itertools.pairwise(cycle)]
        raise AssertionError(
            "folder import cycle "
            + " -> ".join(cycle)
            + "\n  "
            + "\n  ".join(edges)
            + "\nmove the piece that makes one of these edges to the folder its importers share (or to a leaf both import)"
        )


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
