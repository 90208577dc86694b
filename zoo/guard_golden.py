"""The parity run's guard step, in its child: ``runtime_probe.load`` on every golden sample the
package stores, whole or compact, called as a serving process calls it (the model's own call
structure, by name where a library type cannot be rebuilt).

- a whole sample (``golden.samples``): its stored inputs, every output element against the stored
  reference within the stored tolerance (``|out - ref| <= atol + rtol*|ref|``), judged as the build
  judges (``runtime_probe.runtime.numerics.stats``): NaN where the reference has NaN, and the same infinity,
  are equal; NaN or Inf where the reference is finite is a mismatch;
- a compact sample (``golden.compact_samples``, over the build's ``--golden-max-mb``): its record
  bounded first (``runtime_probe.golden.cases.compact_cases``: the probe's own check, before
  anything is allocated), its generated inputs made again from their recipes and their SHA-256
  checked (``cases.regenerate``), its captured inputs from the golden file, each output against
  its digest (``cases.check_output``: the stored subset elementwise, then the statistics).

A compact sample that cannot be run (its record out of bounds, its inputs not regenerating
bit-exactly) is a failure here: the guard step's count is the samples it checked, and the parity
run holds it to the build's count, so no sample silently leaves the check.

torch is imported inside the functions: the module is imported by ``zoo.parity``'s parent too.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime_probe.package.manifest import Tolerance

__all__ = ["EQUAL_NAN", "run_golden"]

# NaN against NaN at the same place is equal, as in the build's stage bisection and three-way
# verdict: a model whose eager output holds NaN there (built with --allow-nonfinite) passes; NaN
# where the reference is finite still fails.
EQUAL_NAN = True


def run_golden(pkg: str) -> dict[str, Any]:
    """Load ``pkg`` with ``runtime_probe.load`` and check every stored golden sample.

    Returns: ``load_s``, ``ok``, ``samples`` (how many were checked), ``runs`` (per sample: id,
    ``stored`` "full" or "compact", seconds, max abs error, and for a compact one what its check
    covered), ``failures`` (the first 10), ``output_type``, ``leaf_names``, ``error``.
    """
    from runtime_probe.formats import safetensors as _safetensors
    from runtime_probe.golden import cases as _cases
    from runtime_probe.golden.compact import Bound
    from runtime_probe.guard.load import load
    from runtime_probe.package.archive import open_archive

    t0 = time.perf_counter()
    model = load(pkg)
    out: dict[str, Any] = {"load_s": round(time.perf_counter() - t0, 3)}
    m = model.manifest
    if m.golden is None or not (m.golden.samples or m.golden.compact_samples):
        return {**out, "ok": False, "error": "the package stores no golden samples"}
    archive, _ = open_archive(pkg)
    if archive is None:
        return {**out, "ok": False, "error": "the package's archive could not be opened after load() accepted it"}
    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    shape: dict[str, Any] = {}
    with archive, tempfile.TemporaryDirectory(prefix="zoo-guard-") as tmp:
        golden_path = os.path.join(tmp, "golden.safetensors")
        with open(golden_path, "wb") as fh:
            for chunk in archive.iter_chunks(m.golden.entry):
                fh.write(chunk)
        # the compact records bounded before anything is read or allocated (the probe's rule)
        compact, refused = _cases.compact_cases(m, golden_path)
        failures += [f"{f.evidence.get('sample', '?')}: {f.message}" for f in refused]
        tensors = _safetensors.load(golden_path)
    for s in m.golden.samples:
        values = {name: tensors[key] for name, key in s.inputs.items()}
        got = _call(model, m, values, s.symbols, shape)
        checks = {
            o: _whole(value, tensors[s.outputs[o]], m.reference_tolerance(o)) for o, value in got["outputs"].items() if o in s.outputs
        }
        runs.append(_record(s.id, "full", got, checks, failures))
    for sample_id, sample in compact:
        made, why = _cases.regenerate(sample, tensors)
        if why is not None:
            failures.append(f"{sample_id}: compact sample not run: {_why_words(why)}")
            continue
        values = {**{name: tensors[key] for name, key in sample["inputs"].items()}, **made}
        got = _call(model, m, values, sample["symbols"], shape)
        checks = {}
        for o, value in got["outputs"].items():
            digest = sample["digests"].get(o)
            if digest is None:
                continue
            tol = m.reference_tolerance(o)
            device = str(value.device) if value.device.type == "cuda" else None
            try:
                checks[o] = _cases.check_output(value, digest, tensors, Bound(tol.atol, tol.rtol, EQUAL_NAN), device)
            except (KeyError, ValueError) as exc:  # the record is wrong, not the model: still a failure here
                checks[o] = {"passed": False, "reason": "digest", "found": str(exc)[:300], "expected": "a digest inside the output"}
        runs.append(_record(sample_id, "compact", got, checks, failures))
    out.update(
        ok=not failures,
        samples=len(runs),
        runs=runs,
        failures=failures[:10],
        output_type=shape.get("type"),
        leaf_names=shape.get("names"),
        error=failures[0] if failures else None,
    )
    return out


def _call(model: Any, m: Any, values: dict[str, Any], symbols: Mapping[str, int], shape: dict[str, Any]) -> dict[str, Any]:
    """One guarded call on the sample's inputs (CPU tensors, restrided to the compiled layout):
    its seconds and its tensor outputs by the manifest's names, in the contract's order; ``count``
    how many leaves it returned. ``shape`` gets the returned type and leaf names."""
    import torch
    from torch.utils import _pytree as pytree

    from runtime_probe.formats import symexpr as _symexpr
    from runtime_probe.guard.load import NamedOutputs

    placed: dict[str, Any] = {}
    for spec in m.io.inputs:
        if spec.tensor is None:
            placed[spec.name] = spec.value
            continue
        t = values[spec.name]
        stride = [st if isinstance(st, int) else int(_symexpr.compile_expr(st)(symbols)) for st in spec.tensor.stride]
        if list(t.stride()) != stride and t.numel() > 0:
            t = torch.empty_strided(tuple(t.shape), stride, dtype=t.dtype).copy_(t)
        placed[spec.name] = t.to(model.device)  # the golden file holds CPU tensors; strides are kept
    params = [p for p in m.io.params if p.passed != "omitted"]
    args, kwargs = _call_structure(m, params, placed)
    t1 = time.perf_counter()
    got = model(*args, **kwargs)
    seconds = round(time.perf_counter() - t1, 4)
    if isinstance(got, NamedOutputs):
        flat, names = list(got.values()), list(got.keys())
    else:
        with_path = pytree.tree_flatten_with_path(got)[0]
        flat, names = [v for _, v in with_path], [pytree.keystr(p) for p, _ in with_path]
    shape.update(type=f"{type(got).__module__}.{type(got).__qualname__}", names=names)
    expected = [o.name for o in m.io.outputs if o.tensor is not None]
    outputs = {name: v for name, v in zip(expected, flat) if isinstance(v, torch.Tensor)}
    return {"seconds": seconds, "count": len(flat), "expected": len(expected), "outputs": outputs}


def _whole(value: Any, ref: Any, tol: Tolerance) -> dict[str, Any]:
    """A whole sample's output against its stored reference, every element, by the build's own
    comparison (float64, chunked; a shape or dtype that differs is a mismatch, not an error)."""
    from runtime_probe.runtime import numerics as _numerics

    return _numerics.stats(value.detach(), ref, atol=tol.atol, rtol=tol.rtol, equal_nan=EQUAL_NAN)


def _record(sample_id: str, stored: str, got: Mapping[str, Any], checks: Mapping[str, Any], failures: list[str]) -> dict[str, Any]:
    """The run's entry; each output out of tolerance (or count mismatch) appended to ``failures``."""
    if got["count"] != got["expected"]:
        failures.append(f"{sample_id}: {got['count']} outputs, the manifest lists {got['expected']}")
    worst = 0.0
    for name, c in checks.items():
        if isinstance(c.get("max_abs"), (int, float)):
            worst = max(worst, float(c["max_abs"]))
        if c.get("passed"):
            continue
        if c.get("reason") in ("shape", "dtype", "digest"):
            failures.append(f"{sample_id} ({stored}): {name} {c['reason']} {c.get('found')}, stored {c.get('expected')}")
            continue
        stats = "; ".join(c.get("stats_failed") or [])
        failures.append(
            f"{sample_id} ({stored}): {name} max abs error {float(c.get('max_abs') or 0.0):.3g} beyond atol {c.get('atol', 0.0):.3g}"
            f" + rtol {c.get('rtol', 0.0):.3g}" + (f"; statistics out of tolerance: {stats}" if stats else "")
        )
    run: dict[str, Any] = {"sample": sample_id, "stored": stored, "seconds": got["seconds"], "max_abs_err": worst}
    if stored == "compact":
        run["checked"] = {
            name: f"{c['compact']['elements']} of {c['compact']['of']} elements + {len(c['compact']['stats'])} stats"
            for name, c in checks.items()
            if isinstance(c.get("compact"), Mapping)
        }
    return run


def _why_words(why: Mapping[str, Any]) -> str:
    if why.get("recipe_mismatch"):
        names = ", ".join(str(w.get("input")) for w in why["recipe_mismatch"])
        return f"its input(s) {names} did not regenerate bit-exactly (SHA-256 differs from the build's)"
    return f"its recipe was refused: {str(why.get('recipe_error'))[:300]}"


def _call_structure(m: Any, params: Sequence[Any], values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The call a serving process makes: the original structure where this process can rebuild it,
    else the flat names (``runtime_probe.load``'s documented fallback for a library type)."""
    from torch.utils import _pytree as pytree

    from runtime_probe.formats import treespec as _treespec

    spec = _treespec.load(m.io.in_spec)
    leaves = [values[i.name] for i in m.io.inputs]
    if spec is not None:
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        return list(args), dict(kwargs)
    args, kwargs = [], {}
    for p in params:
        mine = {i.name: values[i.name] for i in m.io.inputs if i.param == p.name}
        value = mine[p.name] if list(mine) == [p.name] else mine
        if p.passed == "positional":
            args.append(value)
        else:
            kwargs[p.name] = value
    return args, kwargs
