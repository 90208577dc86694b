"""``aoti-guard diff A.pt2 B.pt2``: what differs between two packages, read from their manifests.

A semantic diff, not a text diff: the contract (inputs, outputs, dtypes, dims, ranges, guards),
tolerances, golden samples, target (device, CPU ISA, CUDA archs), toolchain, constants (names,
shapes, hashes), the debug twin and the signature, each change said as ``item: A -> B`` and marked
breaking (a caller that worked with A can fail with B: an input added or removed, a dtype, device
or static dim changed, a range narrowed) or compatible (a range widened, tolerances, golden samples,
toolchain, constants' values). Opens no
native code and needs only the standard library. Entry hashes are not verified here (the manifest
records them; ``python -m runtime_probe PKG --verify-only`` checks them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime_probe.package.archive import READ_ERRORS, Archive, file_digest, open_archive, open_package_file
from runtime_probe.package.manifest import (
    MAX_MANIFEST_BYTES,
    CompactSample,
    Dim,
    GoldenSample,
    InputRecipe,
    InputSpec,
    Manifest,
    ManifestError,
    OutputDigest,
    OutputSpec,
    TensorSpec,
    TwinInfo,
    parse_manifest,
)
from runtime_probe.reporting.errors import UsageError
from runtime_probe.reporting.findings import Severity
from runtime_probe.reporting.report import clean
from runtime_probe.runtime import layout
from runtime_probe.trust.signature import SignatureFormatError, read_signature

__all__ = ["DIFF_SCHEMA_VERSION", "SECTIONS", "Change", "PackageDiff", "diff_manifests", "diff_packages", "render_diff"]

# The diff JSON's own version (runtime_probe/schemas/diff.schema.json), MAJOR.MINOR as reports.
DIFF_SCHEMA_VERSION = "1.1"  # 1.1: each change's "impact", the "breaking" count, "fail_on"
SECTIONS = ("contract", "tolerances", "golden", "target", "toolchain", "constants", "twin", "package")
# What makes `diff` exit 1: any difference (the default, exit codes as before 1.1) or only a
# change that breaks callers (a CI gate that lets compatible releases through).
FAIL_ON = ("any", "breaking")


@dataclass(frozen=True)
class Change:
    """One difference. ``a``/``b``: the value in each package, None where it has no such item."""

    section: str  # one of SECTIONS
    item: str  # "input x dim 0", "tolerance output atol"
    a: str | None
    b: str | None
    # True: a caller that worked with A can fail with B (see _contract_breaking and friends)
    breaking: bool = False

    @property
    def impact(self) -> str:
        return "breaking" if self.breaking else "compatible"

    def to_dict(self) -> dict[str, Any]:
        return {"section": self.section, "item": self.item, "a": self.a, "b": self.b, "impact": self.impact}


@dataclass(frozen=True)
class PackageDiff:
    a: dict[str, Any]  # path, bytes, sha256
    b: dict[str, Any]
    changes: tuple[Change, ...]
    fail_on: str = "any"  # one of FAIL_ON

    @property
    def same(self) -> bool:
        return not self.changes

    @property
    def breaking(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.breaking)

    @property
    def exit_code(self) -> int:
        """0 the manifests agree (or, with fail_on "breaking", differ only compatibly), 1 otherwise."""
        failing = self.breaking if self.fail_on == "breaking" else self.changes
        return 1 if failing else 0

    def to_dict(self) -> dict[str, Any]:
        counts = {s: sum(1 for c in self.changes if c.section == s) for s in SECTIONS}
        return {
            "schema_version": DIFF_SCHEMA_VERSION,
            "kind": "diff",
            "a": self.a,
            "b": self.b,
            "same": self.same,
            "exit_code": self.exit_code,
            "fail_on": self.fail_on,
            "breaking": len(self.breaking),
            "counts": {k: v for k, v in counts.items() if v},
            "changes": [c.to_dict() for c in self.changes],
        }


def _read(path: str, label: str) -> tuple[Manifest, dict[str, Any]]:
    """The package's manifest and its file facts (path, bytes, sha256, signer), all read through
    one open descriptor: the sha256 is that of the bytes whose manifest is compared, even while a
    writer replaces the path. Raises UsageError (exit 2) when there is nothing to compare: no
    file, not a usable zip, no or a bad manifest. Every name in a message is cleaned for the
    terminal (``clean``, which is ``escaping.for_terminal``): the path, the manifest's own keys and values."""
    shown = clean(path)
    if not os.path.isfile(path):
        raise UsageError(f"{label} {shown}: no such file", hint="give two .pt2 packages: aoti-guard diff A.pt2 B.pt2")
    check = f"check it with: python -m runtime_probe {shown} --verify-only"
    with open_package_file(path) as fh:
        try:
            size, digest = file_digest(fh)
        except OSError as exc:
            raise UsageError(f"{label} {shown} cannot be read: {exc.strerror or exc}", hint="copy the package to a healthy disk") from None
        archive, findings = open_archive(path, fh=fh)
        if archive is None:
            first = next((f for f in findings if f.severity is Severity.ERROR), None)
            why = clean(first.message) if first else "not a .pt2 archive"
            raise UsageError(f"{label} {shown} cannot be read as a package: {why}", hint=check)
        with archive:
            manifest, signer = _manifest_and_signer(archive, label, shown, check)
    facts = {"path": os.path.abspath(path), "bytes": size, "sha256": digest, "signed": signer}
    return manifest, facts


def _manifest_and_signer(archive: Archive, label: str, shown: str, check: str) -> tuple[Manifest, str | None]:
    if not archive.has(layout.MANIFEST):
        raise UsageError(
            f"{label} {shown} has no manifest (a plain AOTI package): there is no contract to compare",
            hint=f"aoti-guard inspect {shown} shows what it holds; build it with aoti-guard build to get a manifest",
        )
    try:
        manifest = parse_manifest(archive.read(layout.MANIFEST, max_bytes=MAX_MANIFEST_BYTES))
    except ManifestError as exc:  # its message quotes the manifest's own keys: ESC, CR, bidi controls
        raise UsageError(f"{label} {shown}: {clean(exc)}", hint=check) from None
    except READ_ERRORS as exc:
        raise UsageError(f"{label} {shown}: the manifest cannot be read: {clean(str(exc)[:200])}", hint=check) from None
    signer: str | None = None
    if archive.has(layout.SIGNATURE):
        try:
            signer = f"key {read_signature(archive).key_id[:80]}"
        except (SignatureFormatError, *READ_ERRORS):
            signer = "an unreadable signature entry"
    return manifest, signer


def diff_packages(a: str, b: str, fail_on: str = "any") -> PackageDiff:
    """Compare two packages' manifests. Raises UsageError when either cannot be compared."""
    if fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on {clean(fail_on)}: expected one of {', '.join(FAIL_ON)}", hint="aoti-guard diff --help")
    ma, fa = _read(a, "A")
    mb, fb = _read(b, "B")
    changes = list(diff_manifests(ma, mb))
    if fa["signed"] != fb["signed"]:
        # a loader that trusts A's key rejects B unsigned or signed by another key; signing a
        # package that was not signed takes nothing away
        changes.append(Change("package", "signed", fa["signed"] or "unsigned", fb["signed"] or "unsigned", fa["signed"] is not None))
    return PackageDiff(fa, fb, tuple(changes), fail_on)


def diff_manifests(a: Manifest, b: Manifest) -> Iterator[Change]:
    """Every semantic difference between two manifests, section by section (SECTIONS' order)."""
    yield from _contract(a, b)
    yield from _tolerances(a, b)
    yield from _golden(a, b)
    yield from _target_changes(_target(a), _target(b))
    yield from _fields("toolchain", _toolchain(a), _toolchain(b))
    yield from _constants(a, b)
    yield from _twin(a.twin, b.twin)
    yield from _fields("package", _package(a), _package(b))


# ---- rendering of single values (short, stable, comparable) --------------------------------


def _dim(d: int | Dim) -> str:
    if isinstance(d, int):
        return str(d)
    return f"{d.expr}[{d.min}..{'inf' if d.max is None else d.max}]"


def _shape(t: TensorSpec) -> str:
    return "(" + ", ".join(_dim(d) for d in t.shape) + ")"


def _num(x: float) -> str:
    return f"{x:g}"


def _join(items: Iterable[str]) -> str:
    return ", ".join(items) or "-"


def _fields(section: str, a: Mapping[str, str | None], b: Mapping[str, str | None]) -> Iterator[Change]:
    """A change for each key whose value differs (a key only one side has is None on the other)."""
    for key in list(dict.fromkeys([*a, *b])):
        va, vb = a.get(key), b.get(key)
        if va != vb:
            yield Change(section, key, va, vb)


def _keyed(
    section: str,
    what: str,
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    brief: Any,
    *,
    breaks: tuple[bool, bool] = (False, False),
) -> Iterator[Change]:
    """Added and removed items of two name-keyed collections (``brief`` renders one);
    ``breaks``: (a removed item breaks callers, an added one does)."""
    removed_breaks, added_breaks = breaks
    for name in a:
        if name not in b:
            yield Change(section, f"{what} {name}", brief(a[name]), None, removed_breaks)
    for name in b:
        if name not in a:
            yield Change(section, f"{what} {name}", None, brief(b[name]), added_breaks)


# ---- sections --------------------------------------------------------------------------------


def _tensor_fields(t: TensorSpec | None, value: Any) -> dict[str, str | None]:
    if t is None:
        return {"value": json.dumps(value, sort_keys=True)[:200]}
    out: dict[str, str | None] = {"dtype": t.dtype, "rank": str(len(t.shape)), "device": t.device}
    out["contiguous"] = "yes" if t.contiguous else f"no, stride ({', '.join(str(s) for s in t.stride)})"
    for i, d in enumerate(t.shape):
        out[f"dim {i}"] = _dim(d)
    out["value range"] = None if t.value_range is None else f"[{t.value_range[0]}, {t.value_range[1]}]"
    return out


def _io_brief(spec: InputSpec | OutputSpec) -> str:
    t = spec.tensor
    return f"{t.dtype} {_shape(t)}" if t is not None else f"constant {json.dumps(spec.value)[:80]}"


def _contract(a: Manifest, b: Manifest) -> Iterator[Change]:
    """The call contract. Breaking: what a caller passes and A accepted that B refuses (an input
    or parameter added or removed, a dtype/device/layout changed, a size or value range narrowed,
    a guard added, the order or tree changed), or what B returns that a caller of A does not
    expect (an output removed, its dtype, device, rank or a static size changed)."""
    pa = {p.name: f"{p.kind}, passed {p.passed}" for p in a.io.params}
    pb = {p.name: f"{p.kind}, passed {p.passed}" for p in b.io.params}
    yield from _keyed("contract", "parameter", pa, pb, str, breaks=(True, True))
    for name in pa.keys() & pb.keys():
        if pa[name] != pb[name]:
            yield Change("contract", f"parameter {name}", pa[name], pb[name], True)
    for what, xs, ys in (("input", a.io.inputs, b.io.inputs), ("output", a.io.outputs, b.io.outputs)):
        da: dict[str, InputSpec | OutputSpec] = {s.name: s for s in xs}
        db: dict[str, InputSpec | OutputSpec] = {s.name: s for s in ys}
        # an input added has no default (a manifest records none): a caller of A does not pass it;
        # an output added is one more leaf a caller may ignore (the output tree change says if not)
        yield from _keyed("contract", what, da, db, _io_brief, breaks=(True, what == "input"))
        for name in [n for n in da if n in db]:
            ta, tb = da[name].tensor, db[name].tensor
            fa, fb = _tensor_fields(ta, da[name].value), _tensor_fields(tb, db[name].value)
            if "rank" in fa and fa.get("rank") != fb.get("rank"):  # dims do not line up: one change says it
                yield Change("contract", f"{what} {name} shape", _io_brief(da[name]), _io_brief(db[name]), True)
                fa = {k: v for k, v in fa.items() if not k.startswith(("dim ", "rank"))}
                fb = {k: v for k, v in fb.items() if not k.startswith(("dim ", "rank"))}
            for change in _fields("contract", fa, fb):
                breaks = _tensor_change_breaks(what, change.item, ta, tb)
                yield Change("contract", f"{what} {name} {change.item}", change.a, change.b, breaks)
    order_a = [i.name for i in a.io.tensor_inputs()]
    order_b = [i.name for i in b.io.tensor_inputs()]
    if set(order_a) == set(order_b) and order_a != order_b:
        yield Change("contract", "tensor input order", _join(order_a), _join(order_b), True)
    sa = {s.name: s for s in a.io.symbols}
    sb = {s.name: s for s in b.io.symbols}

    def sym(s: Any) -> str:
        return f"[{s.min}, {'inf' if s.max is None else s.max}]"

    # a symbol added or removed is a dim that became dynamic or static: its dim change says which
    yield from _keyed("contract", "symbol", sa, sb, lambda s: f"{sym(s)} ({_join(s.sources)})")
    for name in [n for n in sa if n in sb]:
        x, y = sa[name], sb[name]
        if (x.min, x.max) != (y.min, y.max):
            narrowed = not _range_within((y.min, y.max), (x.min, x.max))
            yield Change("contract", f"symbol {name} range", sym(x), sym(y), narrowed)
        if tuple(x.sources) != tuple(y.sources):
            # a new source ties one more input dim to the symbol: sizes A took apart must now agree
            tied = not set(y.sources) <= set(x.sources)
            yield Change("contract", f"symbol {name} sources", _join(x.sources), _join(y.sources), tied)
    ga = {g.expr or g.text: g.words for g in a.io.guards or ()}
    gb = {g.expr or g.text: g.words for g in b.io.guards or ()}
    yield from _keyed("contract", "guard", ga, gb, str, breaks=(False, True))
    if a.io.in_spec != b.io.in_spec and pa.keys() == pb.keys():
        yield Change("contract", "input tree (pytree spec)", _short(a.io.in_spec), _short(b.io.in_spec), True)
    if a.io.out_spec != b.io.out_spec:
        yield Change("contract", "output tree (pytree spec)", _short(a.io.out_spec), _short(b.io.out_spec), True)


def _range_within(outer: tuple[int, int | None], inner: tuple[int, int | None]) -> bool:
    """Whether ``inner`` (min, max; None: unbounded) lies within ``outer``."""
    (lo, hi), (ilo, ihi) = outer, inner
    return ilo >= lo and (hi is None or (ihi is not None and ihi <= hi))


def _dim_range(d: int | Dim) -> tuple[int, int | None]:
    return (d, d) if isinstance(d, int) else (d.min, d.max)


def _tensor_change_breaks(what: str, key: str, a: TensorSpec | None, b: TensorSpec | None) -> bool:
    """Whether one differing field of an input's or output's tensor (``_tensor_fields``' key) breaks
    callers. An input's size or value range must not narrow (B refuses what A took). An output's
    ranges follow the inputs' (a caller sending what A took gets what A returned), so only a
    static output size changed breaks."""
    if a is None or b is None or key in ("dtype", "device", "rank", "value"):
        return True
    if key == "contiguous":
        return what == "input"  # the guarded loader refuses an input whose layout differs
    if key.startswith("dim "):
        i = int(key[4:])
        da, db = a.shape[i], b.shape[i]
        if what == "output":
            return isinstance(da, int) and isinstance(db, int)
        return not _range_within(_dim_range(db), _dim_range(da))
    if key == "value range":
        if what == "output":
            return False
        unbounded: tuple[int, int | None] = (-(2**63), None)
        ra = a.value_range if a.value_range is not None else unbounded
        rb = b.value_range if b.value_range is not None else unbounded
        return not _range_within(rb, ra)
    return True


def _short(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _tolerances(a: Manifest, b: Manifest) -> Iterator[Change]:
    ta = {t.output: t for t in (a.golden.tolerances if a.golden else ())}
    tb = {t.output: t for t in (b.golden.tolerances if b.golden else ())}
    yield from _keyed("tolerances", "output", ta, tb, lambda t: f"atol {_num(t.atol)} rtol {_num(t.rtol)}")
    for name in [n for n in ta if n in tb]:
        x, y = ta[name], tb[name]
        if x.atol != y.atol:
            yield Change("tolerances", f"{name} atol", _num(x.atol), _num(y.atol))
        if x.rtol != y.rtol:
            yield Change("tolerances", f"{name} rtol", _num(x.rtol), _num(y.rtol))
    if a.golden and b.golden and a.golden.rule != b.golden.rule:
        yield Change("tolerances", "rule", _short(a.golden.rule), _short(b.golden.rule))
    # the tolerance the build checked compiled against eager with (--atol/--rtol, else by dtype)
    yield from _fields("tolerances", _build_check(a), _build_check(b))


def _build_check(m: Manifest) -> dict[str, str | None]:
    """``{output} build check atol/rtol/origin``: each output's ``build_check`` (since 1.7), else
    (an older manifest) the values its rows of the build's validation table carry."""
    recorded = [t for t in (m.golden.tolerances if m.golden else ()) if t.build_check is not None]
    if recorded:
        return {
            f"{t.output} build check {key}": _num(value) if isinstance(value, float) else str(value)
            for t in recorded
            if t.build_check is not None
            for key, value in (("atol", t.build_check.atol), ("rtol", t.build_check.rtol), ("origin", t.build_check.origin))
        }
    seen: dict[str, dict[str, list[str]]] = {}
    table = m.validation.get("table") if isinstance(m.validation, dict) else None
    for row in table if isinstance(table, list) else []:
        if not isinstance(row, dict) or not isinstance(row.get("output"), str):
            continue
        for key in ("atol", "rtol"):
            value = row.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values = seen.setdefault(row["output"], {}).setdefault(key, [])
                if _num(value) not in values:
                    values.append(_num(value))
    return {f"{out} build check {key}": " / ".join(vals) for out, keys in seen.items() for key, vals in keys.items()}


def _golden(a: Manifest, b: Manifest) -> Iterator[Change]:
    """Every golden sample the probe checks, whole or compact (since 1.5): added, removed, its
    sizes, its form, its inputs, and for a compact one its recipes and output digests."""
    ga, gb = a.golden, b.golden
    if ga is None or gb is None:
        if (ga is None) != (gb is None):
            yield Change("golden", "samples", _samples_brief(a), _samples_brief(b))
        return
    sa, sb = _all_samples(ga), _all_samples(gb)

    def sizes(s: Any) -> str:
        return _join(f"{k}={v}" for k, v in sorted(s.symbols.items())) if s.symbols else "static sizes"

    def brief(s: Any) -> str:
        return f"{sizes(s)} ({'compact' if isinstance(s, CompactSample) else 'whole'})"

    yield from _keyed("golden", "sample", sa, sb, brief)
    for sid in [n for n in sa if n in sb]:
        x, y = sa[sid], sb[sid]
        if x.symbols != y.symbols:
            yield Change("golden", f"sample {sid} sizes", sizes(x), sizes(y))
        if isinstance(x, CompactSample) != isinstance(y, CompactSample):
            yield Change("golden", f"sample {sid} stored", _form(x), _form(y))
            continue
        if sorted(x.inputs) != sorted(y.inputs):
            yield Change("golden", f"sample {sid} inputs", _join(sorted(x.inputs)), _join(sorted(y.inputs)))
        if isinstance(x, CompactSample) and isinstance(y, CompactSample):
            yield from _compact(sid, x, y)
    ha, hb = a.hashes.get(ga.entry), b.hashes.get(gb.entry)
    if ha != hb:
        yield Change("golden", "sample data (sha256)", (ha or "-")[:16], (hb or "-")[:16])
    yield from _fields(
        "golden",
        {"stored bytes": str(ga.nbytes), "cap bytes": str(ga.cap_bytes), "dropped": _join(ga.dropped)},
        {"stored bytes": str(gb.nbytes), "cap bytes": str(gb.cap_bytes), "dropped": _join(gb.dropped)},
    )
    yield from _fields("golden", _references(ga), _references(gb))


def _references(g: Any) -> dict[str, str | None]:
    """Whose weights the golden outputs were made with (``aoti-guard references``, manifest 1.8):
    a package whose references are another checkpoint's is probed with that file given at load."""
    r = g.references
    if r is None:
        return {"references made for": "the build's own weights"}
    return {
        "references made for": f"{r.weights} (give it at load: probe --weights, load(..., weights=))",
        "references made by": f"{r.model}, {r.tool}, {r.created}",
    }


def _all_samples(g: Any) -> dict[str, GoldenSample | CompactSample]:
    out: dict[str, GoldenSample | CompactSample] = {s.id: s for s in g.samples}
    out.update({c.id: c for c in (g.compact_samples or ())})
    return out


def _form(s: GoldenSample | CompactSample) -> str:
    return "compact (recipes and output digests)" if isinstance(s, CompactSample) else "whole"


def _compact(sid: str, a: CompactSample, b: CompactSample) -> Iterator[Change]:
    """A compact sample's generated inputs (each recipe) and reference outputs (each digest)."""

    def recipe(r: InputRecipe) -> str:
        return f"{r.kind} {r.dtype}{list(r.shape)} seed {r.seed} sha256 {r.sha256[:16]}"

    def digest(d: OutputDigest) -> str:
        return f"{d.dtype}{list(d.shape)} sum {d.sum} min {d.min} max {d.max} non-finite {d.nonfinite}"

    ra, rb = {r.input: r for r in a.recipes}, {r.input: r for r in b.recipes}
    yield from _keyed("golden", f"sample {sid} recipe", ra, rb, recipe)
    for name in [n for n in ra if n in rb and recipe(ra[n]) != recipe(rb[n])]:
        yield Change("golden", f"sample {sid} recipe {name}", recipe(ra[name]), recipe(rb[name]))
    da, db = {d.output: d for d in a.outputs}, {d.output: d for d in b.outputs}
    yield from _keyed("golden", f"sample {sid} output", da, db, digest)
    for name in [n for n in da if n in db and digest(da[n]) != digest(db[n])]:
        yield Change("golden", f"sample {sid} output {name}", digest(da[name]), digest(db[name]))


def _samples_brief(m: Manifest) -> str:
    return "none" if m.golden is None else f"{len(_all_samples(m.golden))} ({_join(_all_samples(m.golden))})"


def _target_changes(a: Mapping[str, str | None], b: Mapping[str, str | None]) -> Iterator[Change]:
    """Breaking: another device or platform (B does not load where A did), or a GPU arch A had
    kernels for that B lacks. The CPU ISA and the rest are compatible here: whether a host runs
    the package is what the probe checks on that host."""
    for c in _fields("target", a, b):
        if c.item in ("device", "platform"):
            yield Change(c.section, c.item, c.a, c.b, True)
        elif c.item == "kernel archs":
            lost = set((c.a or "-").split(", ")) - set((c.b or "-").split(", ")) - {"-"}
            yield Change(c.section, c.item, c.a, c.b, bool(lost))
        else:
            yield c


def _target(m: Manifest) -> dict[str, str | None]:
    t = m.target
    return {
        "device": t.device_type,
        "platform": f"{t.platform}/{t.machine}",
        "device name": t.device_name,
        "compute capability": t.compute_capability,
        "kernel archs": _join(t.kernel_archs),
        "cuda archs asked": None if t.cuda_archs is None else _join(t.cuda_archs),
        "kernel images": str(len(t.kernels)),
        "-march": t.march,
        "AOTI cpu isa": t.aoti_cpu_isa,
        "cpu isa": _join(sorted(t.cpu_isa)),
        "build cpu": t.build_cpu,
    }


def _toolchain(m: Manifest) -> dict[str, str | None]:
    t = m.toolchain
    out: dict[str, str | None] = {
        "torch": t.torch,
        "torch git": t.torch_git,
        "python": t.python,
        "triton": t.triton,
        "cuda runtime": t.cuda_runtime,
        "driver": t.driver,
        "compiler": t.cxx_version or t.cxx,
        "GLIBCXX needed": t.glibcxx_required,
        "CXXABI needed": t.cxxabi_required,
        "GLIBC needed": t.glibc_required,
        "libstdc++ at build": t.libstdcxx_build,
        "tool": f"{m.tool.get('name', '?')} {m.tool.get('version', '?')}",
    }
    for key, value in sorted(m.inductor_configs.items()):
        out[f"inductor config {key}"] = str(value)
    return out


def _constants(a: Manifest, b: Manifest) -> Iterator[Change]:
    ca = {c.fqn: c for c in a.constants}
    cb = {c.fqn: c for c in b.constants}

    def brief(c: Any) -> str:
        return f"{c.dtype} ({', '.join(map(str, c.shape))}) {c.storage}"

    # new values are a compatible release; a caller that supplies or swaps weights by name
    # (the guarded loader's weight checks) breaks on a constant added, removed, reshaped or moved
    yield from _keyed("constants", "constant", ca, cb, brief, breaks=(True, True))
    for name in [n for n in ca if n in cb]:
        x, y = ca[name], cb[name]
        if (x.dtype, tuple(x.shape)) != (y.dtype, tuple(y.shape)):
            yield Change("constants", f"{name} dtype/shape", brief(x), brief(y), True)
        elif x.sha256 != y.sha256:
            yield Change("constants", f"{name} values (sha256)", x.sha256[:16], y.sha256[:16])
        if x.storage != y.storage:
            yield Change("constants", f"{name} storage", x.storage, y.storage, True)
        if x.kind != y.kind:
            yield Change("constants", f"{name} kind", x.kind, y.kind)


def _twin(a: TwinInfo | None, b: TwinInfo | None) -> Iterator[Change]:
    if a is None or b is None:
        if (a is None) != (b is None):
            yield Change("twin", "debug twin", "present" if a else "none", "present" if b else "none")
        return
    yield from _fields("twin", _twin_fields(a), _twin_fields(b))


def _twin_fields(t: TwinInfo) -> dict[str, str | None]:
    out: dict[str, str | None] = {
        "nan asserts": "on" if t.nan_asserts else "off",
        "printer level": t.intermediate_value_printer,
        "weights": t.weights,
        "kernels recorded": str(len(t.kernels)),
    }
    for key, value in sorted(t.inductor_configs.items()):
        out[f"inductor config {key}"] = str(value)
    return out


def _package(m: Manifest) -> dict[str, str | None]:
    return {"manifest schema": m.schema_version, "model name": m.model_name, "entries hashed": str(len(m.hashes))}


# ---- text --------------------------------------------------------------------------------------


def render_diff(diff: PackageDiff) -> str:
    """The diff as text: one line per change, grouped by section, then a verdict line."""
    lines = [f"A  {diff.a['path']}  ({diff.a['bytes']:,} bytes, sha256 {diff.a['sha256'][:16]}…)"]
    lines.append(f"B  {diff.b['path']}  ({diff.b['bytes']:,} bytes, sha256 {diff.b['sha256'][:16]}…)")
    if diff.same:
        same_bytes = diff.a["sha256"] == diff.b["sha256"]
        lines.append("same: the manifests agree" + (" (the files are identical)" if same_bytes else ""))
        return "\n".join(clean(line) for line in lines) + "\n"
    width = max(len(c.item) for c in diff.changes)
    for section in SECTIONS:
        changes: Sequence[Change] = [c for c in diff.changes if c.section == section]
        if not changes:
            continue
        lines.append(f"{section}:")
        for c in changes:
            mark = "BREAKING " if c.breaking else ""
            if c.a is None:
                lines.append(f"  + {c.item:<{width}}  {mark}{c.b} (only in B)")
            elif c.b is None:
                lines.append(f"  - {c.item:<{width}}  {mark}{c.a} (only in A)")
            else:
                lines.append(f"  ~ {c.item:<{width}}  {mark}{c.a} -> {c.b}")
    counts = ", ".join(f"{n} {s}" for s, n in diff.to_dict()["counts"].items())
    n_breaking = len(diff.breaking)
    verdict = f"{n_breaking} breaking for callers" if n_breaking else "all compatible for callers"
    lines.append(f"differ: {len(diff.changes)} change(s) ({counts}); {verdict}")
    return "\n".join(clean(line) for line in lines) + "\n"
