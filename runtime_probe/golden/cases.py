"""The probe's compact golden samples (manifest ``golden.compact_samples``, schema 1.5): checked
in the parent before any child allocates (``compact_cases``), regenerated and compared in the
child (``regenerate``, ``check_output``), and read back into findings (``reply_findings``).

A recipe comes from a file an attacker may have written: its sizes are held to the contract's
declared ranges and to the byte caps of recipe.py before anything is allocated
(``golden.recipe_invalid``). A recipe that regenerates other values than the build's (its
SHA-256 differs) is ``golden.recipe_mismatch``: the sample could not be checked, which is said,
never judged on inputs the build did not validate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.formats import symexpr as _symexpr
from runtime_probe.formats.serde import SerdeError, from_jsonable, to_jsonable
from runtime_probe.golden import compact as _compact
from runtime_probe.golden import recipe as _recipe
from runtime_probe.package.manifest import CompactSample, InputRecipe, Manifest
from runtime_probe.reporting.findings import Finding, error, warning

__all__ = ["MAX_DIGEST_ELEMENTS", "check_output", "compact_cases", "describe", "regenerate", "reply_findings"]

MAX_DIGEST_ELEMENTS = 1 << 16  # stored elements of one output's digest (the build stores ~1 Ki)
PHASE = "golden"


def compact_cases(m: Manifest, golden_path: str) -> tuple[list[tuple[str, dict[str, Any]]], list[Finding]]:
    """The compact samples as the child's ``sample`` arguments, each checked first; a sample that
    fails a check is left out with a ``golden.recipe_invalid`` error naming why."""
    if m.golden is None or not m.golden.compact_samples:
        return [], []
    try:
        header = _safetensors.read_header(golden_path).tensors
    except (_safetensors.SafetensorsError, OSError) as exc:
        return [], [_invalid("any compact sample", f"the golden file cannot be read: {exc}")]
    cases: list[tuple[str, dict[str, Any]]] = []
    findings: list[Finding] = []
    for s in m.golden.compact_samples:
        why = _problem(m, s, header)
        if why is not None:
            findings.append(_invalid(s.id, why))
            continue
        sample = {
            "id": s.id,
            "inputs": dict(s.inputs),
            "outputs": {},
            "symbols": dict(s.symbols),
            "recipes": [to_jsonable(r) for r in s.recipes],
            "digests": {d.output: to_jsonable(d) for d in s.outputs},
        }
        cases.append((s.id, sample))
    return cases, findings


def _problem(m: Manifest, s: CompactSample, header: Mapping[str, _safetensors.TensorInfo]) -> str | None:
    inputs = {i.name: i for i in m.io.inputs}
    outputs = {o.name: o for o in m.io.outputs}
    pools = {k: (t.torch_dtype_name, t.shape) for k, t in header.items()}
    total = 0
    tensor_inputs = {i.name for i in m.io.tensor_inputs()}
    given = set(s.inputs) | {r.input for r in s.recipes}
    if given != tensor_inputs or len(s.recipes) != len({r.input for r in s.recipes}):
        return f"gives inputs {sorted(given)[:8]}; the contract's tensor inputs are {sorted(tensor_inputs)[:8]}, each once"
    for name, key in s.inputs.items():
        if key not in header:
            return f"stores input {name!r} under {key[:60]!r}, which the golden file does not hold"
    for r in s.recipes:
        why = _recipe.contract_problem(r, inputs.get(r.input), s.symbols, m.io.symbols)
        if why is not None:
            return why
        try:
            _recipe.check_recipe(r, pools)
        except _recipe.RecipeError as exc:
            return str(exc)
        if r.follows is not None and not any(o.input == r.follows and o.kind == "mask" and o.shape == r.shape for o in s.recipes):
            return f"has input {r.input!r} follow {r.follows[:60]!r}, which is no generated mask of its shape"
        total += _recipe.recipe_bytes(r)
    if total > _recipe.MAX_SAMPLE_BYTES:
        return f"needs {total} bytes of generated inputs, over the {_recipe.MAX_SAMPLE_BYTES} byte cap"
    for d in s.outputs:
        spec = outputs.get(d.output)
        if spec is None or spec.tensor is None:
            return f"has a digest of {d.output[:60]!r}, which is not a tensor output of the contract"
        at, ref = header.get(d.indices), header.get(d.values)
        if at is None or ref is None or at.dtype != "I64" or len(at.shape) != 1 or ref.shape != at.shape:
            return f"output {d.output!r}: its digest's positions and values are missing or not two 1-D tensors of one length"
        if at.shape[0] > MAX_DIGEST_ELEMENTS or ref.torch_dtype_name != d.dtype or d.dtype != spec.tensor.dtype:
            return f"output {d.output!r}: its digest holds {at.shape[0]} {ref.torch_dtype_name} values (at most {MAX_DIGEST_ELEMENTS} {spec.tensor.dtype})"
        try:
            shape = [n if isinstance(n, int) else _symexpr.compile_expr(n.expr)(s.symbols) for n in spec.tensor.shape]
        except (_symexpr.ExprError, KeyError, TypeError, ValueError):
            shape = list(d.shape)  # the child compares with what the model returns
        if list(d.shape) != shape:
            return f"output {d.output!r}: its digest's shape {list(d.shape)[:8]} is not the contract's {shape} at these sizes"
    return None


def _invalid(sample: str, why: str) -> Finding:
    return error(
        "golden.recipe_invalid",
        PHASE,
        f"compact golden sample {sample} was not run: its record {why}",
        expected="recipes and digests inside the contract's declared ranges and the byte caps",
        found=why[:300],
        hint="the manifest does not describe what the build stored: rebuild the package (an unsigned manifest may have been edited; sign packages with --sign-key)",
        evidence={"sample": sample},
    )


def regenerate(sample: Mapping[str, Any], tensors: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(child) The sample's generated inputs, and None; or {} and the reply that says why they
    could not be used (``recipe_error``: refused; ``recipe_mismatch``: other values than the build's)."""
    try:
        recipes = [from_jsonable(InputRecipe, r, "recipe") for r in sample.get("recipes") or []]
        pools = {r.pool: tensors[r.pool] for r in recipes if r.pool is not None and r.pool in tensors}
        made = _recipe.generate(recipes, pools)
    except (SerdeError, _recipe.RecipeError) as exc:
        return {}, {"recipe_error": str(exc)[:500]}
    wrong = []
    for r in recipes:
        got = _recipe.sha256_of(made[r.input])
        if got != r.sha256:
            wrong.append({"input": r.input, "expected": r.sha256, "found": got})
    if wrong:
        return {}, {"recipe_mismatch": wrong}
    return made, None


def check_output(
    value: Any, digest: Mapping[str, Any], tensors: Mapping[str, Any], bound: _compact.Bound, device: str | None
) -> dict[str, Any]:
    """(child) One output against its digest (``bound``: its elementwise rule; ``device``: where
    the statistics are computed, None for the CPU); raises ValueError when the digest's positions
    are outside the output (the record is wrong, not the model)."""
    at, ref = tensors[digest["indices"]], tensors[digest["values"]]
    if at.numel() and (int(at.min().item()) < 0 or int(at.max().item()) >= value.numel()):
        raise ValueError(f"the digest of {digest.get('output')!r} holds positions outside its {value.numel()} elements")
    return _compact.check(value, digest, at, ref, bound, device=device)


def reply_findings(sample_id: str, reply: Mapping[str, Any]) -> list[Finding]:
    """The findings of a compact sample that could not be run (empty: it ran)."""
    if reply.get("recipe_mismatch"):
        wrong = reply["recipe_mismatch"]
        names = ", ".join(str(w.get("input")) for w in wrong)
        return [
            warning(
                "golden.recipe_mismatch",
                PHASE,
                f"compact golden sample {sample_id} was not checked: its input(s) {names} did not regenerate bit-exactly here",
                expected=f"sha256 {str(wrong[0].get('expected'))[:16]}...",
                found=f"sha256 {str(wrong[0].get('found'))[:16]}...",
                hint="the values differ from those the build hashed: either this host computes the recipe differently (report it) or the manifest was edited after the build (sign packages with --sign-key); the other samples were checked",
                evidence={"sample": sample_id, "inputs": wrong},
            )
        ]
    for key in ("recipe_error", "compact_error"):
        if reply.get(key):
            return [_invalid(sample_id, str(reply[key]))]
    return []


def describe(sample_id: str, stored: str, outputs: Mapping[str, Any] | None) -> str:
    """One checked sample, for the report: "max (compact: logits 1029 of 65536 elements + 4 stats)"."""
    if stored != "compact":
        return f"{sample_id} ({stored})"
    parts = []
    for name, st in (outputs or {}).items():
        c = st.get("compact") if isinstance(st, Mapping) else None
        if isinstance(c, Mapping):
            parts.append(f"{name} {c.get('elements')} of {c.get('of')} elements + {len(c.get('stats') or [])} stats")
    return f"{sample_id} (compact: {'; '.join(parts) or 'inputs regenerated'})"


def stats_words(st: Mapping[str, Any]) -> str:
    """A compact output's failed statistics, for the mismatch's message ("" when none)."""
    failed: Sequence[str] = st.get("stats_failed") or []
    return f"; statistics out of tolerance: {'; '.join(failed)}" if failed else ""
