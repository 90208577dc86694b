"""Saved ExportedPrograms (``torch.export.save``): the one loader that runs nothing from the file,
and the save made once per build for the helper processes (the ONNX Runtime reference, the AOTI
minifier, the debug twin's child).

A saved program is more than data. ``torch.export.load`` (2.11-2.15) unpickles parts of it:
``data/sample_inputs/*.pt`` with ``torch.load(weights_only=True)`` and, when that fails, again
with ``weights_only=False``; weights and constants marked ``use_pickle`` with
``weights_only=False``; opaque constants with ``pickle.loads``. Any of those runs a payload
(``os.system``) in the build's process. It also hands every symbolic size in ``models/*.json``
to ``sympy.sympify``, which is ``eval``; and it keeps the file's export guards as Python source,
which ``ExportedProgram.module()`` compiles and runs on every call; ``module()`` also pastes the
names of weights and inputs into the Python it compiles, and AOTInductor the weights' names into
its C++, as string literals.

So every load of a saved program goes through ``load_program`` here (the build's TARGET, the
twin child, the ONNX child, the minifier's child): while torch loads, ``torch.load`` is forced
to weights-only (``TORCH_FORCE_WEIGHTS_ONLY_LOAD``, which overrides an explicit
``weights_only=False``), a Python audit hook refuses every global a pickle asks for (no callable,
no code) and every ``sympify`` source that is more than a sympy expression; after the load, each
export guard must be a size condition, each weight's name a plain name and each input's a Python
name. What fails is refused as ``UnsafeProgram`` (a usage error, exit 2) before any of it runs.
The repro script (validate/repro.py) is plain torch by design and forces weights-only alone.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import keyword
import logging
import os
import pickle
import re
import sys
import threading
import tokenize
from collections.abc import Iterator
from typing import Any

from runtime_probe.reporting.errors import UsageError

__all__ = ["UnsafeProgram", "check_guard", "load_program", "save_program", "sympy_source_problem"]

_HINT = (
    "aoti-guard runs nothing from a saved program: export the model again from its source "
    "(torch.export.export) and save it with torch.export.save, or build from the factory (file.py:func); "
    "load a file like this one only if you trust whoever wrote it, since loading it runs its code"
)


class UnsafeProgram(UsageError):
    """A saved program that holds code (a pickle that imports a callable, an expression or a guard
    that is Python beyond its grammar, a weight name that would end a C++ string): refused
    before any of it runs. Exit code 2."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: this file holds pickled code or code in its expressions: {what}", hint=_HINT)
        self.path = path
        self.what = what


def save_program(ep: Any, work: str) -> tuple[str | None, str | None]:
    """``(path, None)``, or ``(None, why)`` when the program cannot be serialized."""
    import torch

    path = os.path.join(work, "program.pt2")
    if os.path.exists(path):
        return path, None
    try:
        torch.export.save(ep, path)
    except Exception as exc:  # noqa: BLE001 - a program torch cannot serialize (custom objects...)
        if os.path.exists(path):
            os.remove(path)
        return None, f"torch.export.save failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return path, None


def load_program(path: str) -> Any:
    """``torch.export.load(path)``, running nothing the file holds.

    Raises:
        UnsafeProgram: the file holds a pickle that asks for a callable, a symbolic expression or
            an export guard beyond its grammar, or a weight name that is not a plain name.
        Exception: whatever torch raises for a file it cannot load (a damaged or foreign file).
    """
    import torch

    with _refusing_code() as refused, _logged_causes() as causes:
        try:
            ep = torch.export.load(path)
        except BaseException as exc:
            # our refusal, or one torch turned into an error of its own (it retries a failed
            # unpickling, and falls back to an older format on a RuntimeError)
            what = refused[0] if refused else _weights_only_refusal(exc)
            if what is None:
                if causes and isinstance(exc, Exception):
                    # torch logs the real error and raises "Please check the warnings above",
                    # which a child's caller never sees: the real one goes on the exception
                    raise RuntimeError(f"torch.export.load could not read {path}: {causes[0]}") from exc
                raise
            raise UnsafeProgram(path, what) from None
    if refused:  # torch caught the refusal and went on: the program is still not to be used
        raise UnsafeProgram(path, refused[0])
    problem = _program_problem(ep)
    if problem is not None:
        raise UnsafeProgram(path, problem)
    return ep


@contextlib.contextmanager
def _logged_causes() -> Iterator[list[str]]:
    """The errors ``torch.export.load`` logs (with their traceback) and then replaces with ``We ran
    into an error when deserializing the saved file. Please check the warnings above`` (2.11-2.15):
    ``NotImplementedError: Deserializing transformers.modeling_outputs.BaseModelOutput in pytree
    is not registered.``"""
    causes: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                causes.append(f"{type(exc).__name__}: {_first_line(str(exc))}")

    handler = _Keep(logging.WARNING)
    logger = logging.getLogger("torch.export")
    logger.addHandler(handler)
    try:
        yield causes
    finally:
        logger.removeHandler(handler)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no message")[:400]


class _Refused(BaseException):
    """Raised by the audit hook: a BaseException, so that torch's ``except Exception`` retries
    (weights-only, then not) cannot swallow it and go on unpickling."""


# The one thread loading a program under the hook, and what was refused there. The hook itself is
# installed once (audit hooks cannot be removed) and costs a comparison while nothing loads.
_guard: dict[str, Any] = {"thread": None, "refused": [], "checking": False}
_hook_lock = threading.Lock()
_hook_installed = False
_one_load = threading.Lock()  # the guard's state and the environment variable are the process's


@contextlib.contextmanager
def _refusing_code() -> Iterator[list[str]]:
    global _hook_installed
    with _hook_lock:
        if not _hook_installed:
            sys.addaudithook(_audit)
            _hook_installed = True
    with _one_load, _forced_weights_only():
        refused: list[str] = []
        _guard.update(thread=threading.get_ident(), refused=refused)
        try:
            yield refused
        finally:
            _guard.update(thread=None, refused=[])


@contextlib.contextmanager
def _forced_weights_only() -> Iterator[None]:
    """Every ``torch.load`` in this process weights-only while it lasts (read by each call, 2.4+),
    its ``weights_only=False`` included; the variables as they were afterwards."""
    saved = {k: os.environ.get(k) for k in ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")}
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"  # read by every torch.load call (2.4+); beats weights_only=False
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)  # both set: torch.load raises
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "pickle.find_class" and event != "compile":
        return
    if _guard["thread"] != threading.get_ident() or _guard["checking"]:
        return
    if event == "pickle.find_class":
        # every global a pickle asks for: the callables REDUCE, BUILD and NEWOBJ would call.
        # torch's weights-only unpickler (tensors, containers) asks for none through here.
        _refuse(f"a pickle asks for {args[0]}.{args[1]} (a weights-only load takes tensors and plain data only)")
    caller = sys._getframe(1)
    if not str(caller.f_globals.get("__name__", "")).startswith("sympy."):
        return  # torch's own compiles (FX code, dataclasses) build on names it sanitizes
    _guard["checking"] = True
    try:
        problem = sympy_source_problem(args[0])
    finally:
        _guard["checking"] = False
    if problem is not None:
        _refuse(problem)


def _refuse(what: str) -> None:
    _guard["refused"].append(what)
    raise _Refused(what)


def _weights_only_refusal(exc: BaseException) -> str | None:
    """torch's weights-only unpickler refusing a global (``Unsupported global: GLOBAL posix.system``),
    anywhere in the exception's chain: the first line of its message."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, pickle.UnpicklingError):
            lines = [line.strip() for line in str(cur).splitlines() if line.strip()]
            detail = next((line for line in lines if "global" in line.lower()), lines[0] if lines else "")
            return f"a weights-only load refused a pickle in it ({detail[:300]})"
        cur = cur.__cause__ or cur.__context__
    return None


# --- symbolic expressions: what torch's deserializer hands to sympy.sympify ---------------------

_EXPR_OPS = frozenset({"(", ")", ",", "=", "+", "-", "*", "/", "**", "//", "%", "<", ">", "<=", ">=", "==", "!=", "&", "|", "~", "^"})
_EXPR_KEYWORDS = frozenset({"True", "False", "None", "and", "or", "not"})
_PLAIN_STRING = re.compile(r"""[rRuU]?('[A-Za-z0-9_.+\-]*'|"[A-Za-z0-9_.+\-]*")""")


def sympy_source_problem(source: object) -> str | None:
    """Why ``source`` (what sympy compiles while parsing: text, bytes or an AST) is more than a
    sympy expression, or None. An expression is names, numbers, quoted plain words and operators:
    no attribute, no subscript, no dunder, and a name that resolves in sympy's namespace or
    builtins only where it is a sympy class or value (``Symbol``, ``Max``, ``oo``), so it can
    build expressions and call nothing else."""
    if isinstance(source, ast.AST):
        text = ast.unparse(source)
    elif isinstance(source, (bytes, bytearray)):
        text = bytes(source).decode("utf-8", "replace")
    elif isinstance(source, str):
        text = source
    else:
        return f"sympy compiled a {type(source).__name__}, not an expression"
    if text.strip() == "from sympy import *":  # parse_expr's own namespace
        return None
    bad = f"a symbolic expression is Python code: {text[:200]!r}"
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in _LAYOUT]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return bad
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.NUMBER:
            continue
        if tok.type == tokenize.STRING:
            if not _PLAIN_STRING.fullmatch(tok.string):
                return bad
        elif tok.type == tokenize.OP:
            if tok.string not in _EXPR_OPS:
                return bad
        elif tok.type == tokenize.NAME:
            after = tokens[i + 1].string if i + 1 < len(tokens) else ""
            if "__" in tok.string or (keyword.iskeyword(tok.string) and tok.string not in _EXPR_KEYWORDS):
                return bad
            if after != "=" and not _harmless_name(tok.string):  # NAME= is a keyword argument (positive=True)
                return bad
        else:
            return bad
    return None


_LAYOUT = frozenset({tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT})


def _harmless_name(name: str) -> bool:
    """A name an expression may use: a sympy class or value (or torch's sympy functions), or one
    neither sympy's namespace nor builtins define (a symbol of the program: ``s77``)."""
    if name in _EXPR_KEYWORDS:
        return True
    import sympy  # type: ignore[import-untyped]

    from runtime_probe.runtime.torch_compat import sympy_functions

    for namespace in (sympy_functions(), sympy):
        value = getattr(namespace, name, None)
        if value is not None:
            return isinstance(value, sympy.Basic) or (isinstance(value, type) and issubclass(value, sympy.Basic))
    return not hasattr(builtins, name)


# --- after the load: the export guards and the names -------------------------------------------

# what torch's printer writes in a guard (``L['x'].size()[0] <= 64``, ``max(2, L['x'].size()[1] // 2)``)
_GUARD_NAMES = frozenset(
    {"L", "math", "torch", "inf", "max", "min", "abs", "int", "float", "bool", "round"}
    | {"IsNonOverlappingAndDenseIndicator", "cast_symbool_to_symint_guardless"}
)
_GUARD_WORD = re.compile(r"[A-Za-z0-9_.\- ]*")  # an input's name or a string input's value
_GUARD_METHODS = frozenset({"size", "stride", "storage_offset", "dim", "numel", "item"})
_GUARD_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Constant,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Load,
    ast.boolop,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
)


def check_guard(text: str) -> str | None:
    """Why ``text``, an export guard that ``ExportedProgram.module()`` compiles and runs, is more
    than a condition on the inputs' sizes, or None: sizes, strides and values of ``L[...]``,
    numbers, arithmetic, comparisons, ``math``'s functions, ``torch.sym_*`` and ``min``/``max``."""
    bad = f"an export guard is Python code: {text[:200]!r}"
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return bad
    for node in ast.walk(tree):
        if not isinstance(node, _GUARD_NODES):
            return bad
        if isinstance(node, ast.Name) and node.id not in _GUARD_NAMES:
            return bad
        if isinstance(node, ast.Attribute) and not _guard_attribute(node):
            return bad
        if isinstance(node, ast.Call) and node.keywords:
            return bad
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return bad
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and not _GUARD_WORD.fullmatch(node.value):
            return bad  # torch swaps L['x'] for args[0] in the TEXT: a quote or bracket there could move a literal's end
    return None


def _guard_attribute(node: ast.Attribute) -> bool:
    if node.attr.startswith("_"):
        return False
    if isinstance(node.value, ast.Name) and node.value.id == "math":
        return True
    if isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr.startswith("sym_")
    return node.attr in _GUARD_METHODS


def _plain_name(name: object) -> bool:
    """A weight's or buffer's name as a module has it (``layers.0.weight``, a ModuleDict key):
    printable, without a quote or a backslash, which would end or escape the string literal it is
    pasted into: ``getattr(self.lin, "NAME")`` in the FX code of ``module()``, and
    ``constants_info_[0].original_fqn = "NAME";`` in the C++ AOTInductor generates."""
    return isinstance(name, str) and bool(name) and name.isprintable() and not any(c in name for c in "\"'\\")


def _python_name(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def _program_problem(ep: Any) -> str | None:
    from runtime_probe.runtime.torch_compat import export_guard_texts

    for text in export_guard_texts(ep) or []:
        problem = check_guard(text)
        if problem is not None:
            return problem
    specs = [*ep.graph_signature.input_specs, *ep.graph_signature.output_specs]
    names = [*ep.state_dict, *ep.constants, *(s.target for s in specs if getattr(s, "target", None) is not None)]
    for name in names:
        if not _plain_name(name):
            return f"a weight or buffer is named {str(name)[:200]!r}, which is not a plain name"
    # module() writes its forward's signature from these: def forward(self, NAME...), {'KEY': NAME}
    for entry in ep.module_call_graph:
        signature = entry.signature
        if signature is None:
            continue
        for name in [*(signature.forward_arg_names or []), *_keyword_names(signature.in_spec)]:
            if not _python_name(name):
                return f"an input of the program is named {str(name)[:200]!r}, which is not a Python name"
    return None


def _keyword_names(spec: Any) -> list[object]:
    """The keyword arguments' names in a call's TreeSpec ``((args...), {kwargs})``, else none."""
    count = getattr(spec, "num_children", 0)
    if getattr(spec, "type", None) is not tuple or count != 2:
        return []
    kwargs = spec.child(1)
    return list(kwargs.context or []) if getattr(kwargs, "type", None) is dict else []
