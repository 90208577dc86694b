"""torch.export's own words turned into the fix for the sizes the user asked.

A constraint error of torch.export ends with "Suggested fixes:" written in its ``dynamic_shapes``
language, about the user's Dims and never about the inputs: ``_seq = Dim('_seq', min=1, max=8)``
with ``seq = 8*_seq`` (a multiple of 8), ``seq = Dim('seq', max=128)`` (a narrower range),
``batch = 1`` (a size the code fixed), ``b = a + 1`` (a relation). Above them, sentences such as
"You marked batch as dynamic but your code specialized it to be a constant (1)".

``advise`` reads those lines, puts them against the dims the user declared (``--dynamic`` flags or
the factory's ``dynamic_shapes``, with the example's size of each) and writes the same fix in both
of the user's languages: the ``--dynamic`` flags (builder/resolve/dynamic.py's grammar, the range being the
free symbol's) and the ``dynamic_shapes`` code. A declared dim pinned to its example's size because
an input the user left static is tied to it (a padding mask beside ``input_ids``) is not said to be
fixed by the code: the ``Tie`` found for it (export/ties.py) names that input, and the fix declares it with the same
symbol. The declared dims are read in export/declared_dims.py; an example outside its declared range is
export/ranges.py's; ``library_type_hint`` (export/library_types.py) gives the fix for a type torch cannot
flatten (a Hugging Face ``DynamicCache`` in the output).

Wording read (torch 2.11 to 2.15): the "Suggested fixes:" block (stable since 2.3; ``min=2`` is
left out, ``max=oo`` means no maximum), "specialized it to be a constant (N)", the older "was
inferred to be a constant (N)", "resulted in a specialized value of N", and the sources
``seq = L['x'].size()[1]`` of the violation lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.builder.export.declared_dims import Declared, declared_dims
from aoti_guard.builder.export.library_types import library_type_hint

__all__ = [
    "Advice",
    "Declared",
    "Fixes",
    "Tie",
    "advise",
    "declared_dims",
    "dynamic_fix",
    "library_type_hint",
    "parse_fixes",
    "pinned_by_a_tie",
    "suggested_fixes",
]


@dataclass(frozen=True)
class Tie:
    """An input dimension the user left static that goes with the declared symbol ``name``:
    ``input:dim`` is ``mul * name + add``. ``proven``: torch.export, given that dimension free,
    made it that expression (an op ties them: ``input_ids * attention_mask``); not proven: it kept
    a free size of its own in the graph, has ``name``'s example size, and sits in an input with a
    proven tie (a padding mask's batch, which the model indexes rather than broadcasts)."""

    input: str
    dim: int
    name: str
    mul: int = 1
    add: int = 0
    example: int | None = None
    proven: bool = True

    @property
    def where(self) -> str:
        return f"{self.input}:{self.dim}"

    @property
    def flag(self) -> str:
        return f"{self.where}={_size(self.mul, self.name, self.add)}"


@dataclass(frozen=True)
class Fixes:
    """What torch.export's message says, by Dim name."""

    lines: tuple[str, ...] = ()  # the "Suggested fixes:" lines as torch wrote them
    ranges: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)  # Dim('n', min=, max=)
    constants: Mapping[str, int] = field(default_factory=dict)  # n = 4, or "specialized it to be a constant (4)"
    relations: Mapping[str, tuple[int, str, int]] = field(default_factory=dict)  # n = mul*root + add
    sources: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # n = L['x'].size()[1] -> ("x", 1)

    def __bool__(self) -> bool:
        return bool(self.ranges or self.constants or self.relations)


@dataclass(frozen=True)
class Advice:
    """The fix: a hint in words, and the same in ``--dynamic`` flags and ``dynamic_shapes`` code."""

    hint: str
    flags: tuple[str, ...] = ()
    code: str | None = None
    examples: tuple[tuple[str, int], ...] = ()  # INPUT:DIM -> an example size the fix asks for

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.flags:
            out["dynamic_flags"] = list(self.flags)
        if self.code:
            out["dynamic_shapes_code"] = self.code
        if self.examples:
            out["example_sizes"] = dict(self.examples)
        return out


def suggested_fixes(text: str) -> list[str]:
    """The lines of torch.export's "Suggested fixes:" block (``_seq = Dim('_seq', min=1, max=64)``,
    ``seq = 8*_seq``), which its constraint errors end with."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Suggested fixes:")
    except StopIteration:
        return []
    fixes: list[str] = []
    for line in lines[start + 1 :]:
        if not line.strip():
            if fixes:
                break
            continue  # a blank line right after the heading (older torch)
        if not line.startswith((" ", "\t")):
            break
        fixes.append(line.strip())
    return fixes[:16]


_NAME = r"[A-Za-z_]\w*"
_DIM_FIX = re.compile(rf"^(?P<name>{_NAME}) = Dim\(\s*['\"](?P<dim>{_NAME})['\"](?P<rest>.*)\)$")
_BOUND = re.compile(r"\b(?P<key>min|max)\s*=\s*(?P<value>-?\d+|-?oo|-?int_oo|-?inf)")
_ASSIGN = re.compile(rf"^(?P<name>{_NAME}) = (?P<rhs>.+?)(?:\s*#.*)?$")
_LINEAR = (
    re.compile(rf"^(?:(?P<mul>\d+)\*)?(?P<root>{_NAME})(?:(?P<sign>[+-])(?P<add>\d+))?$"),
    re.compile(rf"^(?P<root>{_NAME})\*(?P<mul>\d+)(?:(?P<sign>[+-])(?P<add>\d+))?$"),
)
_SPECIALIZED = (
    re.compile(rf"You marked (?P<name>{_NAME}) as dynamic but your code specialized it to be a constant \((?P<value>-?\d+)\)"),
    re.compile(rf"\b(?P<name>{_NAME}) was inferred to be a constant \((?P<value>-?\d+)\)"),
    re.compile(rf"generated for (?P<name>{_NAME})\b[^\n]*? resulted in a specialized value of (?P<value>-?\d+)"),
)
_SOURCE = re.compile(rf"\b(?P<name>{_NAME}) = \w+\[['\"](?P<input>{_NAME})['\"]\]\.(?:size\(\)|shape)\[(?P<dim>\d+)\]")


def _bound(value: str) -> int | None:
    return None if "oo" in value or "inf" in value else int(value)


def parse_fixes(text: str) -> Fixes:
    """torch.export's suggested fixes, specialisations and the sources of the Dims they name."""
    lines = suggested_fixes(text)
    ranges: dict[str, tuple[int | None, int | None]] = {}
    constants: dict[str, int] = {}
    relations: dict[str, tuple[int, str, int]] = {}
    for line in lines:
        m = _DIM_FIX.match(line)
        if m:
            bounds = {b["key"]: _bound(b["value"]) for b in _BOUND.finditer(m["rest"])}
            ranges[m["name"]] = (bounds.get("min"), bounds.get("max"))
            continue
        m = _ASSIGN.match(line)
        if not m:
            continue
        rhs = m["rhs"].replace(" ", "")
        if re.fullmatch(r"-?\d+", rhs):
            constants[m["name"]] = int(rhs)
        elif rhs.startswith("None") and re.search(r"#\s*(-?\d+)", line):  # older torch: ``batch = None  # 1``
            constants[m["name"]] = int(re.search(r"#\s*(-?\d+)", line)[1])  # type: ignore[index]
        else:
            for pattern in _LINEAR:
                lin = pattern.match(rhs)
                if lin:
                    add = int(lin["add"] or 0) * (-1 if lin["sign"] == "-" else 1)
                    relations[m["name"]] = (int(lin["mul"] or 1), lin["root"], add)
                    break
    for pattern in _SPECIALIZED:
        for m in pattern.finditer(text):
            constants.setdefault(m["name"], int(m["value"]))
    sources: dict[str, tuple[str, int]] = {}
    for m in _SOURCE.finditer(text):
        sources.setdefault(m["name"], (m["input"], int(m["dim"])))
    return Fixes(tuple(lines), ranges, constants, relations, sources)


# --------------------------------------------------------------------------------------------------
# the advice
# --------------------------------------------------------------------------------------------------


@dataclass
class _Plan:
    """One declared dim after the fixes: ``mul * root + add``, or static (``constant``)."""

    decl: Declared
    root: str
    mul: int
    add: int
    constant: int | None = None


def pinned_by_a_tie(text: str, declared: Sequence[Declared]) -> list[Declared]:
    """The declared dims torch's message pins to their example's size (not 0 or 1, which torch
    pins for any input): the ones a static input tied to them may explain (``find_ties``)."""
    fixes = parse_fixes(text)
    out = []
    for d in declared:
        value = fixes.constants.get(d.name)
        if value is not None and d.example is not None and d.example == _size_at(d, value) and d.example not in (0, 1):
            out.append(d)
    return out


def advise(text: str, declared: Sequence[Declared] = (), *, from_flags: bool = False, ties: Sequence[Tie] = ()) -> Advice | None:
    """The fix torch's message asks for, as ``--dynamic`` flags and ``dynamic_shapes`` code for the
    dims in ``declared``; None when the message holds no suggested fix or specialisation. ``ties``:
    the static inputs found tied to declared symbols (``find_ties``): a symbol pinned only by them
    stays dynamic, and they join the fix with its symbol."""
    fixes = parse_fixes(text)
    if not fixes:
        return None
    dims = list(declared) or _from_sources(fixes)
    if not dims:
        return _unplaced(fixes)
    asked: dict[str, tuple[int | None, int | None]] = {}
    for d in dims:
        asked.setdefault(d.name, (d.min, d.max))  # the range of each free symbol the user named
    plans = [_plan(d, fixes) for d in dims]
    proven = {t.name for t in ties if t.proven}
    for p in plans:
        if p.constant is not None and not _zero_one(p) and p.root in proven:
            p.constant = None  # pinned by a static input, not by the code: _tie_notes says which
    ranges = _root_ranges(plans, fixes, asked)
    notes = [note for p in plans for note in _explain(p, ranges, fixes, asked)]
    kept = [p for p in plans if p.constant is None or _zero_one(p)]
    roots = {p.root for p in kept}
    order = {name: i for i, name in enumerate(dict.fromkeys(t.input for t in ties))}
    # find_ties names an unproven one only beside a proven one in the same input
    joined = sorted((t for t in ties if t.name in roots), key=lambda t: (order[t.input], t.dim))
    notes += _tie_notes(joined, [p for p in plans if p.root in proven], fixes)
    kept += [_Plan(Declared(t.input, t.dim, t.name, example=t.example), t.name, t.mul, t.add) for t in joined]
    flags, code = _flags(kept, ranges), _code(kept, ranges)
    parts = ["torch.export suggests: " + "; ".join(fixes.lines) + "." if fixes.lines else "", *notes]
    flag_text = " ".join(f"--dynamic {f}" for f in flags)
    if flags and from_flags:
        parts.append(f"Build with: {flag_text}; in a factory's dynamic_shapes: {code}")
    elif flags:
        parts.append(f"In the factory's dynamic_shapes: {code} (or drop them and build with {flag_text})")
    elif kept:
        parts.append(f"In the factory's dynamic_shapes: {code}")
    else:
        parts.append("With every declared dimension static, build without --dynamic (and without dynamic_shapes).")
    return Advice(" ".join(p for p in parts if p), tuple(flags), code if kept else None)


def _tie_notes(ties: Sequence[Tie], plans: Sequence[_Plan], fixes: Fixes) -> list[str]:
    """What ties each static input to a declared symbol, in the user's terms."""
    notes: list[str] = []
    said: set[str] = set()
    for p in plans:
        d = p.decl
        mine = [t for t in ties if t.name == d.name and t.proven]
        if not mine or p.root != d.name or d.name in said:
            continue
        said.add(d.name)
        which = " and ".join(f"{t.where} ({_example(t)})" for t in mine)
        pinned = fixes.constants.get(d.name)
        lead = f"torch.export pins {d.where} ({d.name}) to {pinned}" if pinned is not None else f"{d.where} ({d.name}) is tied"
        notes.append(
            f"{lead} because the model's code ties it to {which}, which you left static: "
            f"declare {'them' if len(mine) > 1 else 'it'} with the same symbol, " + " ".join(f"--dynamic {t.flag}" for t in mine) + "."
        )
    for t in ties:
        if not t.proven:
            notes.append(
                f"{t.where} ({_example(t)}) has {t.name}'s example size and a size of its own in the graph (no op ties it to "
                f"{t.name}: a padding mask the model indexes, rather than broadcasts, is like that): declare it as {t.name} too, --dynamic {t.flag}, or every call must pass it at {t.example}."
            )
    return notes


def _example(t: Tie) -> str:
    return "its size is unknown" if t.example is None else f"{t.example} in the example"


def _from_sources(fixes: Fixes) -> list[Declared]:
    """Without the user's declaration (a caller that gave none): the inputs torch's lines name."""
    names = set(fixes.ranges) | set(fixes.constants) | set(fixes.relations)
    return [Declared(inp, dim, name) for name, (inp, dim) in fixes.sources.items() if name in names]


def _unplaced(fixes: Fixes) -> Advice:
    """Fixes whose dims we cannot place: torch's lines in the flag grammar, with INPUT:DIM."""
    roots = {root for _, root, _ in fixes.relations.values()}
    flags = [
        f"INPUT:DIM={_size(mul, root, add)}{_range(*fixes.ranges.get(root, (None, None)))}" for mul, root, add in fixes.relations.values()
    ]
    flags += [f"INPUT:DIM={name}{_range(lo, hi)}" for name, (lo, hi) in fixes.ranges.items() if name not in roots]
    text = "torch.export suggests: " + "; ".join(fixes.lines) + "."
    if flags:
        text += (
            " Give the dimension that way, e.g. " + " ".join(f"--dynamic {f}" for f in flags) + " (INPUT:DIM: the dimension torch names)"
        )
    return Advice(text, tuple(flags))


def _plan(d: Declared, fixes: Fixes) -> _Plan:
    if d.name in fixes.constants:
        return _Plan(d, d.name, d.mul, d.add, fixes.constants[d.name])
    if d.name in fixes.relations:
        mul, root, add = fixes.relations[d.name]
        return _Plan(d, root, d.mul * mul, d.mul * add + d.add)
    return _Plan(d, d.name, d.mul, d.add)


def _zero_one(p: _Plan) -> bool:
    """A size of 0 or 1 in the example that torch specialised (it does so for every 0/1 size)."""
    return p.constant is not None and p.constant in (0, 1) and p.decl.example == _size_at(p.decl, p.constant)


def _size_at(d: Declared, value: int) -> int:
    return d.mul * value + d.add


def _root_ranges(
    plans: Sequence[_Plan], fixes: Fixes, asked: Mapping[str, tuple[int | None, int | None]]
) -> dict[str, tuple[int | None, int | None]]:
    """Each free symbol's range: torch's where it gave one, else what the user asked (carried
    through a new root: seq 8..64 with seq = 8*_seq gives _seq 1..8)."""
    out: dict[str, tuple[int | None, int | None]] = {}
    for p in plans:
        if p.root in out or (p.constant is not None and not _zero_one(p)):
            continue
        lo, hi = fixes.ranges.get(p.root, (None, None))
        if p.root in asked:
            user_lo, user_hi = asked[p.root]
            if p.root not in fixes.ranges or (lo is None and hi is None):
                lo, hi = user_lo, user_hi
            else:
                lo = user_lo if lo is None else lo  # torch leaves min=2 out: the user's min stands
                hi = user_hi if hi is None and "oo" not in _fix_line(fixes, p.root) else hi
        else:  # a root torch introduced: from the size the user asked for
            d = p.decl
            n_lo, n_hi = asked.get(d.name, (None, None))
            size_lo = None if n_lo is None else d.mul * n_lo + d.add
            size_hi = None if n_hi is None else d.mul * n_hi + d.add
            step = p.mul
            if lo is None and size_lo is not None and step > 0:
                lo = max(1, math.ceil((size_lo - p.add) / step))
            if hi is None and size_hi is not None and step > 0 and "oo" not in _fix_line(fixes, p.root):
                hi = (size_hi - p.add) // step
        out[p.root] = (lo, hi)
    return out


def _fix_line(fixes: Fixes, name: str) -> str:
    return next((line for line in fixes.lines if line.startswith(f"{name} = Dim(")), "")


def _explain(p: _Plan, ranges: Mapping[str, tuple[int | None, int | None]], fixes: Fixes, declared_names: Iterable[str]) -> list[str]:
    d = p.decl
    if p.constant is not None:
        if _zero_one(p):
            return [
                f"The example's {d.input} has size {d.example} at dim {d.dim} ({d.name}), and torch.export specializes "
                f"an example size of 0 or 1: give an example with {d.input}.shape[{d.dim}] >= 2 (e.g. 2), keeping the range you asked."
            ]
        return [
            f"The model's code fixes {d.where} ({d.name}) to {p.constant}: it cannot be dynamic as written; "
            f"make {d.where} static (no --dynamic for it), or change the code that needs {p.constant}."
        ]
    if (p.root, p.mul, p.add) == (d.name, d.mul, d.add) and d.name not in fixes.ranges:
        return []  # untouched by the fixes
    if p.root != d.name and p.root in declared_names:
        return [
            f"{d.where} ({d.name}) is always {_size(p.mul, p.root, p.add)} in the model's code: give it that size, not a symbol of its own."
        ]
    lo, hi = ranges.get(p.root, (None, None))
    got_lo = None if lo is None else p.mul * lo + p.add
    got_hi = None if hi is None else p.mul * hi + p.add
    asked_lo = None if d.min is None else d.mul * d.min + d.add
    asked_hi = None if d.max is None else d.mul * d.max + d.add
    sizes = f"{_num(got_lo)}..{_num(got_hi)}" + (f" in steps of {p.mul}" if p.mul > 1 else "")
    asked = f"you asked {_num(asked_lo)}..{_num(asked_hi)}" if (asked_lo, asked_hi) != (None, None) else "you gave no range"
    return [f"{d.where} ({d.name}): {asked}; the model takes {sizes}."]


def _num(value: int | None) -> str:
    return "" if value is None else str(value)


def _size(mul: int, root: str, add: int) -> str:
    text = f"{mul}*{root}" if mul != 1 else root
    if add > 0:
        text += f"+{add}"
    elif add < 0:
        text += f"-{-add}"
    return text


def _range(lo: int | None, hi: int | None) -> str:
    return "" if lo is None and hi is None else f":{_num(lo)}..{_num(hi)}"


def dynamic_fix(dims: Sequence[Declared], ranges: Mapping[str, tuple[int | None, int | None]]) -> tuple[tuple[str, ...], str]:
    """The ``--dynamic`` flags and ``dynamic_shapes`` code for ``dims`` as declared, each free
    symbol with its range from ``ranges`` (by name)."""
    plans = [_Plan(d, d.name, d.mul, d.add) for d in dims]
    return tuple(_flags(plans, ranges)), _code(plans, ranges)


def _flags(plans: Iterable[_Plan], ranges: Mapping[str, tuple[int | None, int | None]]) -> list[str]:
    """``--dynamic`` values (builder/resolve/dynamic.py): a range once per free symbol. Empty when a size
    has no flag form (``seq - 1``: the grammar has no minus); the code form still has it."""
    out: list[str] = []
    ranged: set[str] = set()
    for p in plans:
        if p.add < 0:
            return []
        rng = "" if p.root in ranged else _range(*ranges.get(p.root, (None, None)))
        ranged.add(p.root)
        out.append(f"{p.decl.where}={_size(p.mul, p.root, p.add)}{rng}")
    return out


def _code(plans: Iterable[_Plan], ranges: Mapping[str, tuple[int | None, int | None]]) -> str:
    """The same as ``dynamic_shapes`` code: the free symbols first, then the dict by input."""
    roots: dict[str, str] = {}
    shapes: dict[str, list[str]] = {}
    for p in plans:
        if p.root not in roots:
            lo, hi = ranges.get(p.root, (None, None))
            bounds = "".join(f", {k}={v}" for k, v in (("min", lo), ("max", hi)) if v is not None)
            roots[p.root] = f"{p.root} = Dim('{p.root}'{bounds})"
        size = p.root if p.mul == 1 else f"{p.mul} * {p.root}"
        if p.add:
            size += f" {'+' if p.add > 0 else '-'} {abs(p.add)}"
        shapes.setdefault(p.decl.input, []).append(f"{p.decl.dim}: {size}")
    body = ", ".join(f"'{name}': {{{', '.join(dims)}}}" for name, dims in shapes.items())
    return "; ".join(roots.values()) + f"; dynamic_shapes = {{{body}}}"
