"""Export guards are part of the contract.

torch.export keeps the conditions on sizes it assumed while tracing, beyond ranges, in
``ExportedProgram._guards_code`` (``(L['x'].size()[1]*L['x'].size()[2]) == 64`` for a model that
branches on ``h*w == 64``). ``ep.module()`` refuses a call that breaks one (``Guard failed``);
AOTInductor does not check them, so the bare package runs the branch export traced for every
size in range (docs/probe.md; seen on CPU 2.13 and, for timm's ViT at 224 px, on the GPU with
2.11). Deferred runtime asserts (``aten._assert_scalar`` in the graph) are compiled into the
package and raise there; they are listed in the export step's detail, not recorded.

Here each guard is:
- translated into the contract's symbols (``h*w == 64``) and into words (``h*w must equal 64``),
  or kept verbatim when it cannot be (then nothing can enforce it: an error in any case);
- dropped when it holds for every size the user declared (a range, or a relation the user
  declared by giving two dims one ``Dim``): the contract already says it;
- otherwise recorded in the manifest (``IOContract.guards``) and reported as
  ``build.export_specialized``: an error, or a warning with ``--allow-export-guards``, naming the
  dims it constrains, the golden samples that break it and the fix.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.builder.export.contract import spec_kwarg_order
from aoti_guard.builder.export.guard_bounds import holds_on_ranges
from aoti_guard.builder.golden import planned_assignments, satisfy_guards
from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.manifest import Dim, IOContract, ShapeGuard
from runtime_probe.reporting.findings import Finding, error, warning

__all__ = ["GuardReport", "Translation", "read_guards", "translate"]

PHASE = "export"
_ENUMERATE_LIMIT = 20_000  # points of the declared ranges tried when sympy cannot decide a guard
_AUTO_NAME = re.compile(r"^s\d+$")  # a symbol torch named, not the user
_VERBS = {ast.Eq: "equal", ast.NotEq: "not equal", ast.Lt: "be below", ast.LtE: "be at most", ast.Gt: "be above", ast.GtE: "be at least"}
_NEGATED: dict[type, ast.cmpop] = {
    ast.Eq: ast.NotEq(),
    ast.NotEq: ast.Eq(),
    ast.Lt: ast.GtE(),
    ast.LtE: ast.Gt(),
    ast.Gt: ast.LtE(),
    ast.GtE: ast.Lt(),
}


class Untranslatable(ValueError):
    """A guard reads something the contract does not describe, or uses an operation outside the
    condition grammar."""


@dataclass(frozen=True)
class Ref:
    """One size a guard reads: ``x.shape[1]`` (kind "size") or ``x.stride()[0]`` (kind "stride")."""

    leaf: str
    kind: str
    dim: int

    @property
    def text(self) -> str:
        return f"{self.leaf}.shape[{self.dim}]" if self.kind == "size" else f"{self.leaf}.stride()[{self.dim}]"


@dataclass
class Translation:
    """One guard parsed: its condition with each size read replaced by a placeholder name
    (``_ref0``), and the sizes in placeholder order."""

    text: str
    tree: ast.expr
    refs: list[Ref]

    def render(self, name_of: Callable[[int, Ref], ast.expr]) -> ast.expr:
        """The condition with placeholder ``k`` replaced by ``name_of(k, ref)``."""
        refs = self.refs

        class _Sub(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.expr:
                if node.id.startswith("_ref"):
                    k = int(node.id[4:])
                    return name_of(k, refs[k])
                return node

        return _Sub().visit(_copy(self.tree))  # type: ignore[no-any-return]


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body


# -- parsing torch's guard text -------------------------------------------------------------------

_ALLOWED_CALLS = {"max": "Max", "min": "Min", "Max": "Max", "Min": "Min"}
# torch 2.15 writes some guards with torch's symbolic max/min: timm vit_tiny's reads
# ``torch.sym_max(1, L['x'].size()[3] // 16)`` (2.13 wrote none such), the same integer function
_TORCH_CALLS = {"sym_max": "Max", "sym_min": "Min"}


def _call_name(func: ast.expr) -> str | None:
    """The contract's name for a call torch's guard text makes (``max``, ``torch.sym_max``), else None."""
    if isinstance(func, ast.Name):
        return _ALLOWED_CALLS.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch":
        return _TORCH_CALLS.get(func.attr)
    return None


def translate(text: str, leaves: Sequence[str]) -> Translation:
    """Parse one guard of ``_guards_code``; ``leaves`` are the contract's tensor input names.
    Raises Untranslatable."""
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise Untranslatable("torch's text does not parse as Python") from None
    refs: list[Ref] = []
    known = set(leaves)

    def walk(node: ast.expr, depth: int) -> ast.expr:
        if depth > 60:
            raise Untranslatable("the guard is nested too deeply")
        ref = _ref(node, known)
        if ref is not None:
            if ref not in refs:
                refs.append(ref)
            return ast.Name(id=f"_ref{refs.index(ref)}", ctx=ast.Load())
        if isinstance(node, ast.Constant) and type(node.value) in (int, bool):
            return node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            return ast.UnaryOp(op=node.op, operand=walk(node.operand, depth + 1))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
            return ast.BinOp(left=walk(node.left, depth + 1), op=node.op, right=walk(node.right, depth + 1))
        if isinstance(node, ast.Compare) and all(type(op) in _VERBS for op in node.ops):
            return ast.Compare(left=walk(node.left, depth + 1), ops=node.ops, comparators=[walk(c, depth + 1) for c in node.comparators])
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(op=node.op, values=[walk(v, depth + 1) for v in node.values])
        name = _call_name(node.func) if isinstance(node, ast.Call) and not node.keywords else None
        if isinstance(node, ast.Call) and name is not None:
            return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[walk(a, depth + 1) for a in node.args], keywords=[])
        raise Untranslatable(f"it uses {ast.unparse(node)[:80]!r}, which the contract's condition grammar does not have")

    out = walk(tree, 0)
    if not refs:
        raise Untranslatable("it reads no input size")
    return Translation(text, out, refs)


def _ref(node: ast.expr, known: set[str]) -> Ref | None:
    """``L['x'].size()[1]``, ``L['x'].size(1)``, ``L['cfg']['a'].stride()[0]`` as a Ref, else None.
    Raises Untranslatable for a size of something the contract has no tensor for."""
    index: ast.expr | None = None
    call: ast.expr = node
    if isinstance(node, ast.Subscript):
        index, call = node.slice, node.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("size", "stride")):
        return None
    if index is None:
        if len(call.args) != 1:
            return None
        index = call.args[0]
    elif call.args:
        return None
    if not (isinstance(index, ast.Constant) and type(index.value) is int):
        raise Untranslatable(f"it reads {ast.unparse(node)[:80]!r} with a computed index")
    leaf = _leaf_name(call.func.value)
    if leaf is None or leaf not in known:
        raise Untranslatable(f"it reads {ast.unparse(node)[:80]!r}, which is not a tensor input of the contract")
    return Ref(leaf, "size" if call.func.attr == "size" else "stride", index.value)


def _leaf_name(node: ast.expr) -> str | None:
    """``L['x']`` -> ``x``; ``L['cfg']['a']`` -> ``cfg['a']``; ``L['xs'][1]`` -> ``xs[1]`` (the
    contract's leaf names: the parameter, then torch's pytree key string)."""
    rest = ""
    while True:
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
            if isinstance(node.value, ast.Name) and node.value.id == "L" and isinstance(key, str):
                return key + rest
            if type(key) is int:
                rest = f"[{key}]" + rest
            elif isinstance(key, str):
                rest = f"[{key!r}]" + rest
            else:
                return None
            node = node.value
        elif isinstance(node, ast.Attribute):
            rest = f".{node.attr}" + rest
            node = node.value
        else:
            return None


# -- reading, judging and reporting ---------------------------------------------------------------


@dataclass
class GuardReport:
    """What the export step learned: the guards to record, the findings, the detail."""

    guards: tuple[ShapeGuard, ...] = ()
    findings: list[Finding] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(f.severity.value == "error" for f in self.findings)


def guard_texts(ep: Any) -> list[str] | None:
    """torch's guard texts of ``ep`` (2.11-2.15 keep them in ``_guards_code``); None when this
    torch exposes none."""
    from runtime_probe.runtime.torch_compat import export_guard_texts

    return export_guard_texts(ep)


def runtime_asserts(ep: Any) -> list[str]:
    """The deferred runtime asserts in the graph (``aten._assert_scalar``): AOTInductor compiles
    them into the package, which raises when one fails (seen on 2.13: ``Expected u0 <= s77 but
    received 10``), so they are listed, not recorded."""
    out = []
    for node in ep.graph.nodes:
        if node.op == "call_function" and "_assert_scalar" in str(node.target):
            msg = node.args[1] if len(node.args) > 1 else str(node.args[0])
            out.append(str(msg)[:300])
    return out


def _translated(text: str, world: _World, contract: IOContract) -> tuple[Any, str] | Finding:
    """A guard's translation and its expression over the contract's names, or the finding for a
    guard that cannot be read (recorded as text: the loader cannot check it)."""
    try:
        tr = translate(text, [i.name for i in contract.tensor_inputs()])
    except Untranslatable as exc:
        return _untranslatable_finding(text, str(exc))
    try:
        expr = ast.unparse(tr.render(lambda k, ref: world.contract_node(ref)))
        _symexpr.compile_condition(expr)
    except (Untranslatable, _symexpr.ExprError) as exc:
        return _untranslatable_finding(text, str(exc))
    return tr, expr


def read_guards(
    ep: Any,
    contract: IOContract,
    example: tuple[Sequence[Any], Mapping[str, Any]],
    *,
    declared: Mapping[str, Mapping[int, str]] | None,
    accept: bool,
    seed: int = 0,
) -> GuardReport:
    """The guards of ``ep`` over ``contract``; ``example``: the (args, kwargs) it was exported with.

    ``declared``: leaf -> {dim: the user's Dim name} (contract.declared_dim_names); None for a
    saved ExportedProgram, whose own symbols are then the declaration. ``accept``:
    --allow-export-guards.
    """
    report = GuardReport()
    texts = guard_texts(ep)
    asserts = runtime_asserts(ep)
    if asserts:
        report.detail["runtime_asserts_in_package"] = asserts
    if texts is None:
        report.detail["guards"] = "this torch exposes no export guards (ExportedProgram._guards_code)"
        return report
    if not texts:
        return report
    world = _World(ep, contract, declared)
    planned = planned_assignments(contract, _example_leaves(ep, *example), seed=seed)
    recorded: list[ShapeGuard] = []
    implied: list[str] = []
    for text in texts:
        read = _translated(text, world, contract)
        if isinstance(read, Finding):
            recorded.append(ShapeGuard(text=text, expr=None, words=f"{text} must hold"))
            report.findings.append(read)
            continue
        tr, expr = read
        if world.implied(tr):
            implied.append(text)
            continue
        guard = ShapeGuard(
            text=text,
            expr=expr,
            words=_words(tr.render(lambda k, ref: ast.Name(id=world.word_name(ref), ctx=ast.Load()))),
            arguments=tuple(dict.fromkeys(r.leaf for r in tr.refs)),
            dims=tuple(r.text for r in tr.refs),
        )
        recorded.append(guard)
        report.findings.append(_specialized_finding(guard, tr, world, planned, accept))
    report.guards = tuple(recorded)
    report.detail["guards"] = [{"text": g.text, "expr": g.expr, "words": g.words} for g in recorded]
    if implied:
        report.detail["guards_implied_by_ranges"] = implied
    return report


def _example_leaves(ep: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    from torch.utils import _pytree as pytree

    ordered = {k: kwargs[k] for k in spec_kwarg_order(ep.call_spec.in_spec, kwargs)}
    return list(pytree.tree_leaves((tuple(args), ordered)))


class _World:
    """Each size a guard can read, three ways: the contract's expression (what the manifest
    records), the user's declaration (what the build judges: two dims the user declared apart
    are two variables even where export unified them), and the words."""

    def __init__(self, ep: Any, contract: IOContract, declared: Mapping[str, Mapping[int, str]] | None) -> None:
        import torch

        self.contract = contract
        self.declared = declared
        self.specs = {i.name: i.tensor for i in contract.tensor_inputs() if i.tensor is not None}
        user = [s for s in ep.graph_signature.input_specs if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
        nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
        fakes = [nodes[s.arg.name].meta.get("val") if getattr(s.arg, "name", None) in nodes else None for s in user]
        fake_tensors = [v for v in fakes if isinstance(v, torch.Tensor)]
        self.fakes = dict(zip(self.specs, fake_tensors))
        self.ranges = {str(k): v for k, v in ep.range_constraints.items()}
        self._fresh: dict[tuple[str, int], Any] = {}
        self._range_of: dict[str, str] = {}  # a fresh variable -> the export symbol whose range it has

    # the contract's side
    def contract_node(self, ref: Ref) -> ast.expr:
        t = self.specs.get(ref.leaf)
        if t is None:
            raise Untranslatable(f"{ref.leaf} has no tensor in the contract")
        seq = t.shape if ref.kind == "size" else t.stride
        if not 0 <= ref.dim < len(seq):
            raise Untranslatable(f"{ref.text} is beyond {ref.leaf}'s rank {len(seq)}")
        d = seq[ref.dim]
        text = str(d) if isinstance(d, int) else d.expr if isinstance(d, Dim) else str(d)
        try:
            return ast.parse(text, mode="eval").body
        except SyntaxError:
            raise Untranslatable(f"{ref.text} is {text!r} in the contract") from None

    def word_name(self, ref: Ref) -> str:
        """A size in words: the user's symbol name where the contract gives this dim one, else
        where it is read (``x.shape[1]``)."""
        t = self.specs.get(ref.leaf)
        if t is not None and ref.kind == "size" and 0 <= ref.dim < len(t.shape):
            d = t.shape[ref.dim]
            if isinstance(d, Dim) and _symexpr.is_symbol(d.expr) and not _AUTO_NAME.match(d.expr):
                return d.expr
        return ref.text

    # the declared side
    def declared_expr(self, ref: Ref) -> Any:
        import sympy  # type: ignore[import-untyped]
        import torch

        fake = self.fakes.get(ref.leaf)
        if fake is None:
            raise Untranslatable(f"{ref.leaf} has no traced tensor")
        seq = fake.shape if ref.kind == "size" else fake.stride()
        if not 0 <= ref.dim < len(seq):
            raise Untranslatable(f"{ref.text} is beyond {ref.leaf}'s rank")
        value = seq[ref.dim]
        expr = value.node.expr if isinstance(value, torch.SymInt) else sympy.Integer(int(value))
        if ref.kind == "size" and isinstance(expr, sympy.Symbol):
            return self._declared_symbol(ref.leaf, ref.dim, expr)
        # a derived size or a stride: its symbols, each as the plain size of this leaf (or of the
        # first leaf) that carries it
        subs = {}
        for sym in expr.free_symbols:
            site = self._site(sym, ref.leaf)
            if site is not None:
                subs[sym] = self._declared_symbol(site[0], site[1], sym)
        return expr.xreplace(subs)

    def _site(self, sym: Any, prefer: str) -> tuple[str, int] | None:
        import torch

        found = None
        for leaf, fake in self.fakes.items():
            for dim, size in enumerate(fake.shape):
                if isinstance(size, torch.SymInt) and size.node.expr == sym:
                    if leaf == prefer:
                        return leaf, dim
                    found = found or (leaf, dim)
        return found

    def _declared_symbol(self, leaf: str, dim: int, sym: Any) -> Any:
        import sympy

        if self.declared is None:
            return sym  # a saved program: its symbols are all there is
        name = self.declared.get(leaf, {}).get(dim)
        if name is not None:
            return sympy.Symbol(f"user_{name}", integer=True)
        key = (leaf, dim)
        if key not in self._fresh:  # Dim.DYNAMIC / Dim.AUTO: a variable of its own, whatever export unified it with
            self._fresh[key] = sympy.Symbol(f"dim{len(self._fresh)}", integer=True)
        self._range_of[str(self._fresh[key])] = str(sym)
        return self._fresh[key]

    def bounds(self, var: Any) -> tuple[int, int | None]:
        """The range of a declared variable: that of the symbol export gave its dim."""
        name = str(var)
        source = self._range_of.get(name, name)
        if name.startswith("user_"):
            source = next((str(s) for s in self._user_symbols(name[5:])), name)
        vr = self.ranges.get(source)
        if vr is None:
            return 0, None
        lo = int(vr.lower) if vr.lower.is_Integer else 0
        hi = int(vr.upper) if vr.upper.is_Integer else None  # not is_finite: torch's int_oo claims to be finite
        return lo, hi

    def _user_symbols(self, user: str) -> Iterator[Any]:
        import torch

        for leaf, dims in (self.declared or {}).items():
            for dim, name in dims.items():
                fake = self.fakes.get(leaf)
                size: Any = fake.shape[dim] if fake is not None and dim < len(fake.shape) else None
                if name == user and isinstance(size, torch.SymInt):
                    yield size.node.expr

    def implied(self, tr: Translation) -> bool:
        """Whether the guard holds for every size the user declared: proven by sympy over the
        ranges' lower bounds, by interval arithmetic over the ranges (export/guard_bounds.py), or checked
        at every point of small bounded ranges."""
        import sympy

        try:
            exprs = [self.declared_expr(r) for r in tr.refs]
            cond = _to_sympy(tr.tree, exprs)
        except (Untranslatable, TypeError, ValueError):
            return False
        if cond is sympy.true:
            return True
        if cond is sympy.false:
            return False
        variables = sorted(cond.free_symbols, key=str)
        shifted = {}
        for v in variables:
            lo, _ = self.bounds(v)
            shifted[v] = lo + sympy.Symbol(f"t_{v}", integer=True, nonnegative=True)
        try:
            if sympy.simplify(cond.xreplace(shifted)) is sympy.true:
                return True
        except (TypeError, ValueError, RecursionError):
            pass
        spans = [self.bounds(v) for v in variables]
        if holds_on_ranges(cond, dict(zip(variables, spans))):  # bounds carried through Max, Mod, floor
            return True
        if any(hi is None for _, hi in spans):
            return False
        total = 1
        for lo, hi in spans:
            total *= max(0, (hi or 0) - lo + 1)
        if total > _ENUMERATE_LIMIT:
            return False
        for point in itertools.product(*(range(lo, (hi or 0) + 1) for lo, hi in spans)):
            if cond.xreplace(dict(zip(variables, map(sympy.Integer, point)))) is not sympy.true:
                return False
        return True


def _to_sympy(node: ast.expr, refs: Sequence[Any]) -> Any:
    import sympy

    if isinstance(node, ast.Name) and node.id.startswith("_ref"):
        return refs[int(node.id[4:])]
    if isinstance(node, ast.Constant):
        return sympy.true if node.value is True else sympy.false if node.value is False else sympy.Integer(node.value)
    if isinstance(node, ast.UnaryOp):
        inner = _to_sympy(node.operand, refs)
        return sympy.Not(inner) if isinstance(node.op, ast.Not) else -inner
    if isinstance(node, ast.BinOp):
        a, b = _to_sympy(node.left, refs), _to_sympy(node.right, refs)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv):
            return sympy.floor(a / b)
        return sympy.Mod(a, b)
    if isinstance(node, ast.Compare):
        ops = {ast.Eq: sympy.Eq, ast.NotEq: sympy.Ne, ast.Lt: sympy.Lt, ast.LtE: sympy.Le, ast.Gt: sympy.Gt, ast.GtE: sympy.Ge}
        terms = [_to_sympy(node.left, refs)] + [_to_sympy(c, refs) for c in node.comparators]
        return sympy.And(*(ops[type(op)](terms[i], terms[i + 1]) for i, op in enumerate(node.ops)))
    if isinstance(node, ast.BoolOp):
        parts = [_to_sympy(v, refs) for v in node.values]
        return sympy.And(*parts) if isinstance(node.op, ast.And) else sympy.Or(*parts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        fn = sympy.Max if node.func.id == "Max" else sympy.Min
        return fn(*(_to_sympy(a, refs) for a in node.args))
    raise TypeError(f"no sympy form for {ast.dump(node)[:80]}")


def _words(node: ast.expr) -> str:
    """``h*w must equal 64``; a compound condition: ``<condition> must hold``."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return f"{_plain(node.left)} must {_VERBS[type(node.ops[0])]} {_plain(node.comparators[0])}"
    return f"{_plain(node)} must hold"


def _plain(node: ast.expr) -> str:
    """A condition or size for people: ``h*w``, ``1 + W//16*(H//16)`` (products and floor
    divisions without the spaces ast.unparse puts around them)."""
    text = ast.unparse(node).replace(" * ", "*").replace(" // ", "//")
    return text[1:-1] if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]) else text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _negation(node: ast.expr) -> str:
    """The condition under which a guard fails, in words: ``h*w != 64``."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        flipped = ast.Compare(left=node.left, ops=[_NEGATED[type(node.ops[0])]], comparators=node.comparators)
        return _plain(flipped)
    return f"not ({_plain(node)})"


def _fmt(env: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "static"


def _specialized_finding(
    guard: ShapeGuard, tr: Translation, world: _World, planned: Sequence[tuple[str, dict[str, int]]], accept: bool
) -> Finding:
    assert guard.expr is not None
    cond = _symexpr.compile_condition(guard.expr)
    named = tr.render(lambda k, ref: ast.Name(id=world.word_name(ref), ctx=ast.Load()))
    names = list(dict.fromkeys(world.word_name(r) for r in tr.refs))
    wrong = f"every ({', '.join(names)}) with {_negation(named)}" if len(names) > 1 else f"every {names[0]} with {_negation(named)}"
    breaking = _breaking(cond, planned)
    symbols = sorted(_symexpr.free_symbols(guard.expr))
    dims = ", ".join(f"{r.text}{'' if world.word_name(r) == r.text else ' (' + world.word_name(r) + ')'}" for r in tr.refs)
    relation = _is_relation(tr)
    fixes = _fixes(tr, named, _general_example(guard, world, planned))
    unified = relation and len(symbols) == 1 and all(isinstance(world.contract_node(r), ast.Name) for r in tr.refs)
    samples = "the golden samples that break it: " + "; ".join(breaking) if breaking else "no golden sample breaks it"
    if unified and not breaking:
        samples += f" (export gave {' and '.join(r.text for r in tr.refs)} one symbol, {symbols[0]}, so every sample has them equal)"
    what = "relates" if relation else "pins"
    # seen on 2.13: a bare load computes the traced branch for unequal sizes; AOTI's optional input
    # checks compare the sizes of one symbol, and so refuse them
    unless = " unless AOTI_RUNTIME_CHECK_INPUTS=1 (its checks compare sizes that share a symbol)" if unified else ""
    base = (
        f"torch.export assumed {_plain(named)} (torch: {guard.text}), which {what} the declared dynamic dims {dims}; "
        f"AOTInductor does not check it, so the bare package computes the branch traced for the example for {wrong}{unless}"
    )
    evidence = {
        "guard": guard.text,
        "expr": guard.expr,
        "words": guard.words,
        "dims": [r.text for r in tr.refs],
        "symbols": symbols,
        "wrong_for": wrong,
        "breaking_samples": breaking,
    }
    if accept:
        return warning(
            "build.export_specialized",
            PHASE,
            base + "; accepted with --allow-export-guards: the guarded loader refuses other sizes (input.guard) and the golden "
            "samples satisfy it",
            expected=f"sizes with {_plain(named)} (the guarded loader refuses others)",
            found=(
                "the planned golden samples that break it, moved to the nearest sizes that satisfy it: " + "; ".join(breaking)
                if breaking
                else samples
            ),
            hint="a bare torch load of this package does not enforce the guard; load it with runtime_probe.load",
            evidence=evidence,
        )
    return error(
        "build.export_specialized",
        PHASE,
        base,
        expected="no condition on the declared dynamic dims beyond their ranges",
        found=f"the guard {_plain(named)}; {samples}",
        hint="fix the export, one of: " + "; ".join(fixes) + ". Or accept the restriction with --allow-export-guards: "
        "the guarded loader then refuses sizes that break it",
        evidence=evidence,
    )


def _breaking(cond: _symexpr.Cond, planned: Sequence[tuple[str, dict[str, int]]]) -> list[str]:
    """The planned golden samples that break the guard, as ``id (sizes)``."""
    breaking = []
    for sample_id, env in planned:
        try:
            held = cond(env)
        except _symexpr.ExprError:
            continue
        if not held:
            breaking.append(f"{sample_id} ({_fmt(env)})")
    return breaking


def _fixes(tr: Translation, named: ast.expr, general: str | None) -> list[str]:
    """The ways out of a specialising guard, the likeliest first."""
    fixes = [
        (f"an example that takes the general branch ({general})" if general else "an example that takes the general branch"),
        f"torch._check({_plain(named)}) in forward when the model only supports such sizes (then build with --allow-export-guards)",
        "torch.cond(pred, true_fn, false_fn, operands) so that both branches are compiled",
        f"static dims for {', '.join(r.text for r in tr.refs if r.kind == 'size')}",
    ]
    if _is_relation(tr):
        fixes.insert(0, f"one Dim for {' and '.join(r.text for r in tr.refs)} when they are always equal")
    return fixes


def _is_relation(tr: Translation) -> bool:
    """A guard that compares two sizes with each other, not with a constant."""
    tree = tr.tree
    if isinstance(tree, ast.Compare) and len(tree.ops) == 1:
        sides = [tree.left, tree.comparators[0]]
        return all(any(isinstance(n, ast.Name) for n in ast.walk(side)) for side in sides)
    return False


def _general_example(guard: ShapeGuard, world: _World, planned: Sequence[tuple[str, dict[str, int]]]) -> str | None:
    """Sizes near the example where the guard does not hold: an example for the other branch."""
    example = dict(planned[0][1]) if planned else {}
    if not example or guard.expr is None:
        return None
    try:
        negated = _symexpr.compile_condition(f"not ({guard.expr})")
    except _symexpr.ExprError:
        return None
    bounds = {
        s.name: (max(s.min, 2), s.max if s.max is not None else max(2 * example[s.name], 2))
        for s in world.contract.symbols
        if s.name in example
    }
    found = satisfy_guards(example, [(guard, negated)], bounds, budget=10_000)
    if found is None:
        return None
    parts = []
    for sym, value in sorted(found.items()):
        source = next((s.sources[0] for s in world.contract.symbols if s.name == sym and s.sources), sym)
        parts.append(f"{source}={value}")
    return "e.g. " + ", ".join(parts)


def _untranslatable_finding(text: str, why: str) -> Finding:
    return error(
        "build.export_specialized",
        PHASE,
        f"torch.export assumed {text}, which aoti-guard cannot translate into the contract's symbols ({why}): "
        "AOTInductor does not check it and the guarded loader could not either",
        expected="a guard over the inputs' sizes",
        found=text,
        hint="remove the condition from the export (torch.cond, static dims, or an example that takes the general branch); "
        "--allow-export-guards cannot accept a guard nothing can enforce",
        evidence={"guard": text, "why": why},
    )
