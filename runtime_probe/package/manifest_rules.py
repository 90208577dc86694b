"""Checks of a parsed manifest against itself and its archive, before any later phase uses it.

``parse_manifest`` checks types. These check values that later code relies on: names that become
paths (model names, the twin's folder), entries the manifest points to, dtype names looked up on
torch, size expressions compiled by the guarded loader. Without a signature anyone can edit a
manifest, so each of these must be a finding here, never a KeyError deep in the golden phase or a
path outside a temporary folder.
"""

from __future__ import annotations

import functools
import keyword
import re
from collections.abc import Iterator
from typing import Any

from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.package.archive import Archive, unsafe_name
from runtime_probe.package.manifest import Dim, Manifest, TensorSpec
from runtime_probe.package.sample_ids import id_problems as golden_id_problems
from runtime_probe.package.wrapper import wrapper_facts
from runtime_probe.reporting.findings import Finding, error
from runtime_probe.reporting.paths import plain_name_problem
from runtime_probe.runtime import layout

__all__ = ["check_manifest"]

PHASE = "archive"
MAX_PROBLEMS = 20  # a hostile manifest can hold millions of bad values; say enough to act on

# torch dtype names as ``str(dtype)`` prints them without "torch.": float32, bfloat16, int64,
# uint8, complex64, float8_e4m3fn, qint8, bool... (looked up with getattr on torch).
_DTYPE = re.compile(r"^(bool|(float|bfloat|int|uint|complex|qint|quint|bits)[0-9][0-9a-z_]{0,30})$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_DEVICE_TYPES = ("cpu", "cuda")
# GPU archs in ASCII digits: the host rules read them with int(), and ``\d`` / ``str.isdigit``
# take other scripts' digits ("¹" passes isdigit(), then int() raises)
_CAPABILITY = re.compile(r"[0-9]{1,4}[af]?")  # compute_capability "90", --cuda-arch "90a"
_SASS_ARCH = re.compile(r"sm_[0-9]{1,4}[af]?")  # kernel_archs
_IMAGE_ARCH = re.compile(r"(?:[a-z]{1,10}(?:_[0-9]{1,5})?:)?(?:sm|compute)_[0-9]{1,4}[af]?")  # "sm_90a", "ptx:sm_90"


def check_manifest(manifest: Manifest, archive: Archive) -> list[Finding]:
    """Problems of ``manifest`` as ``manifest.invalid`` findings (at most MAX_PROBLEMS)."""
    findings: list[Finding] = []
    for problem in _problems(manifest, archive):
        findings.append(
            error(
                "manifest.invalid",
                PHASE,
                f"the manifest {problem}",
                hint="the manifest was edited or damaged after the build; do not load this package, rebuild it",
            )
        )
        if len(findings) >= MAX_PROBLEMS:
            break
    return findings


def _problems(m: Manifest, archive: Archive) -> Iterator[str]:
    why = plain_name_problem(m.model_name)  # the loader's folder data/aotinductor/NAME/
    if why is not None:
        yield f"names the model {m.model_name[:80]!r}, which is not a plain name: it {why}"
    elif m.model_name not in archive.models():
        yield f"names the model {m.model_name!r}, which the archive does not hold"
    if m.target.device_type not in _DEVICE_TYPES:
        yield f"targets device type {m.target.device_type[:40]!r} (expected one of {', '.join(_DEVICE_TYPES)})"
    yield from _arch_problems(m)
    for rel, digest in m.hashes.items():
        why = unsafe_name(rel)
        if why is not None or rel in layout.UNHASHED:
            yield f"lists a hash for {rel[:80]!r}, which is not an entry name it can hash"
        if not _HEX64.match(digest):
            yield f"records {digest[:80]!r} as the SHA-256 of {rel[:80]!r} (expected 64 lowercase hex digits)"
    yield from _io_problems(m)
    yield from _constant_problems(m)
    yield from _golden_problems(m, archive)
    yield from _twin_problems(m, archive)


def _constant_problems(m: Manifest) -> Iterator[str]:
    loaded: set[str] = set()
    for c in m.constants:
        if c.storage == "package":
            # the probe's constants check and --weights go by this name: two constants under one
            # would let a lying manifest hide one of the package's constants
            if c.loaded_name in loaded:
                yield f"lists two constants the loaded model would know as {c.loaded_name[:80]!r}"
            loaded.add(c.loaded_name)
        if not _DTYPE.match(c.dtype):
            yield f"gives constant {c.fqn[:80]!r} the dtype {c.dtype[:40]!r}"
        if any(s < 0 for s in c.shape) or c.nbytes < 0:
            yield f"gives constant {c.fqn[:80]!r} a negative size"


def _golden_problems(m: Manifest, archive: Archive) -> Iterator[str]:
    g = m.golden
    if g is None:
        return
    if g.entry not in archive.entries:
        yield f"points to golden samples in {g.entry[:80]!r}, which the archive does not hold"
    elif g.entry not in m.hashes:
        yield f"points to golden samples in {g.entry!r} without recording their hash"
    # a sample id names its files (--save-inputs) and its report lines: the one rule for such names
    yield from golden_id_problems(g)
    inputs = {i.name for i in m.io.inputs}
    outputs = set(m.output_names())
    for s in g.samples:
        unknown = sorted(set(s.inputs) - inputs) + sorted(set(s.outputs) - outputs)
        if unknown:
            yield f"golden sample {s.id[:40]!r} refers to {', '.join(n[:40] for n in unknown[:3])}, which the contract does not have"
    for t in g.tolerances:
        if t.atol < 0 or t.rtol < 0:
            yield f"gives output {t.output[:40]!r} a negative tolerance"


def _twin_problems(m: Manifest, archive: Archive) -> Iterator[str]:
    if m.debug_twin is not None and m.debug_twin_without_weights is not None:
        yield "records two debug twins (debug_twin and debug_twin_without_weights)"
    if m.debug_twin is not None and m.debug_twin.weights != "own":
        yield f"records under debug_twin a twin whose weights are {m.debug_twin.weights[:40]!r} (only 'own' belongs there)"
    if m.debug_twin_without_weights is not None and m.debug_twin_without_weights.weights != "release":
        yield (
            f"records under debug_twin_without_weights a twin whose weights are "
            f"{m.debug_twin_without_weights.weights[:40]!r} (only 'release' belongs there)"
        )
    twin = m.twin
    if twin is None:
        return
    prefix = twin.entry_prefix
    why = plain_name_problem(twin.model_name)
    if why is not None:
        yield f"names the debug twin {twin.model_name[:80]!r}, which is not a plain name: it {why}"
    if not prefix.endswith("/") or unsafe_name(prefix) is not None or prefix.startswith(layout.AOTI_DIR):
        yield f"stores the debug twin under {prefix[:80]!r} (expected a relative folder outside {layout.AOTI_DIR})"
        return
    # The twin's own generated code says whether its .so holds the weights. A twin without
    # them that a reader takes for one with them crashes on its first call: the manifest
    # may not say otherwise than the code it describes.
    facts = wrapper_facts(archive, prefix)
    included = facts.include_weights if facts is not None else None
    if included is not None and included != (twin.weights == "own"):
        yield (
            f"says the debug twin's weights are {twin.weights[:40]!r}, but its wrapper.cpp builds it with "
            f"include_weights={'true' if included else 'false'}"
        )


def _arch_problems(m: Manifest) -> Iterator[str]:
    t = m.target
    named = [
        ("compute capability", _CAPABILITY, [t.compute_capability] if t.compute_capability is not None else []),
        ("CUDA arch", _CAPABILITY, list(t.cuda_archs or ())),
        ("kernel arch", _SASS_ARCH, list(t.kernel_archs)),
        ("kernel image arch", _IMAGE_ARCH, [a for k in t.kernels for a in k.archs]),
    ]
    for what, pattern, values in named:
        bad = next((v for v in values if not pattern.fullmatch(v)), None)
        if bad is not None:
            yield f"records the {what} {bad[:40]!r} (expected ASCII digits: {'90' if pattern is _CAPABILITY else 'sm_90a'})"


def _io_problems(m: Manifest) -> Iterator[str]:
    for p in m.io.params:
        # the guarded loader builds a Python signature from these names, and reports print them
        if not _is_param_name(p.name):
            yield f"names a parameter {p.name[:80]!r}, which is not a Python identifier"
    for i in m.io.inputs:
        if not _is_param_name(i.param):
            yield f"gives input {i.name[:80]!r} the parameter {i.param[:80]!r}, which is not a Python identifier"
        elif not i.name.isprintable() or not i.name.startswith(i.param):
            yield f"names an input {i.name[:80]!r}, which is not its parameter {i.param!r} followed by printable text"
        if i.kind not in ("tensor", "constant"):
            yield f"gives input {i.name[:80]!r} the kind {i.kind[:40]!r}"
        elif i.kind == "tensor" and i.tensor is None:
            yield f"gives tensor input {i.name[:80]!r} no tensor description"
        if i.tensor is not None:
            yield from _tensor_problems(f"input {i.name[:80]!r}", i.tensor)
    for o in m.io.outputs:
        if o.tensor is not None:
            yield from _tensor_problems(f"output {o.name[:80]!r}", o.tensor)
    for s in m.io.symbols:
        if (s.min < 0 and s.value_of is None) or (s.max is not None and s.max < s.min):  # a value may be negative
            yield f"gives symbol {s.name[:40]!r} the range {s.min}..{s.max}"
    yield from _guard_problems(m)
    yield from _data_check_problems(m)


def _guard_problems(m: Manifest) -> Iterator[str]:
    """Export's shape guards (since 1.4): each one a condition the guarded loader can evaluate,
    over symbols the contract binds. One it cannot evaluate would refuse every call."""
    symbols = {s.name for s in m.io.symbols}
    inputs = {i.name for i in m.io.inputs}
    for g in m.io.guards or ():
        if g.expr is None:
            yield f"records the export guard {g.text[:80]!r} without an expression the loader can check"
            continue
        yield from _condition_problems("an export guard", g, symbols, inputs, kind="a condition over sizes")


def _data_check_problems(m: Manifest) -> Iterator[str]:
    """The model's checks on values (since 1.8): each symbol a value of a one-element tensor input,
    each check a condition over the contract's symbols (one the loader cannot evaluate would
    refuse every call)."""
    tensors = {i.name: i.tensor for i in m.io.inputs if i.tensor is not None}
    symbols = {s.name for s in m.io.symbols}
    inputs = {i.name for i in m.io.inputs}
    for s in m.io.symbols:
        t = tensors.get(s.value_of) if s.value_of is not None else None
        if s.value_of is not None and (t is None or any(not isinstance(d, int) or d != 1 for d in t.shape)):
            yield f"makes symbol {s.name[:40]!r} the value of {s.value_of[:80]!r}, which is not a one-element tensor input"
    for c in m.io.data_checks or ():
        yield from _condition_problems("a data check", c, symbols, inputs, kind="a condition")


def _condition_problems(what: str, record: Any, symbols: set[str], inputs: set[str], *, kind: str) -> Iterator[str]:
    """One recorded condition (an export guard, a data check: ``expr``, ``words``, ``arguments``)
    the loader will evaluate on every call: it must compile, name only the contract's symbols and
    arguments, and say printable words."""
    expr = str(record.expr)
    try:
        _symexpr.compile_condition(expr)
        unknown = sorted(_symexpr.free_symbols(expr) - symbols)
    except _symexpr.ExprError as exc:
        yield f"records {what} {expr[:80]!r} that is not {kind} ({str(exc)[:80]})"
        return
    if unknown:
        yield f"records {what} {expr[:80]!r} over {', '.join(u[:40] for u in unknown[:3])}, which the contract has no symbol for"
    if not record.words.isprintable() or any(a not in inputs for a in record.arguments):
        yield f"records {what} {expr[:80]!r} with unprintable words or arguments the contract does not have"


def _is_param_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _tensor_problems(what: str, t: TensorSpec) -> Iterator[str]:
    if not _DTYPE.match(t.dtype):
        yield f"gives {what} the dtype {t.dtype[:40]!r}"
    if t.value_range is not None:
        lo, hi = t.value_range
        if lo > hi or not t.dtype.startswith(("int", "uint")):
            yield f"gives {what} the value range [{lo}, {hi}] (expected min <= max, on an integer dtype)"
    if t.device not in _DEVICE_TYPES:
        yield f"puts {what} on device {t.device[:40]!r}"
    for d in t.shape:
        if isinstance(d, int):
            if d < 0:
                yield f"gives {what} a negative size {d}"
            continue
        if not isinstance(d, Dim):
            continue
        if d.min < 0 or (d.max is not None and d.max < d.min):
            yield f"gives {what} the size range {d.min}..{d.max} for {d.expr[:40]!r}"
        yield from _expr_problems(what, d.expr)
    for s in t.stride:
        if isinstance(s, str):
            yield from _expr_problems(what, s)


def _expr_problems(what: str, expr: str) -> Iterator[str]:
    why = _expr_error(expr)
    if why is not None:
        yield f"gives {what} a size expression that is not arithmetic over its symbols ({why})"


@functools.lru_cache(maxsize=4096)
def _expr_error(expr: str) -> str | None:
    """Why ``expr`` does not compile, or None. Cached: a manifest repeats the same few
    expressions (``batch``) over thousands of sizes and strides, each an ``ast.parse``."""
    try:
        _symexpr.compile_expr(expr)
    except _symexpr.ExprError as exc:
        return str(exc)[:80]
    return None
