"""What the package keeps of each validated golden sample: all of it, a compact form, or nothing.

In order, as the samples come: a sample whose inputs and reference outputs fit under the cap
(``--golden-max-mb``) is stored whole. One that does not is kept compact: its generated inputs as
recipes (runtime_probe/golden/recipe.py: the probe makes them again, bit-exactly), its captured
inputs (the example's, a user's) whole, and each output as a fixed subset of its elements plus its
statistics (runtime_probe/golden/compact.py). A recipe and a digest are small by construction (at
most ``POOL_MAX`` values per input, ``SPREAD + WORST`` elements per output) and do not count
against the cap; captured inputs do. A sample is dropped (``build.sample_dropped``) only when its
captured inputs alone pass the cap, or an output has no compact form (complex numbers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.builder.golden import Sample
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.golden import compact as _compact
from runtime_probe.package.manifest import CompactSample, GoldenSample, IOContract, OutputDigest, Tolerance, reference_tolerance
from runtime_probe.reporting.findings import Finding, warning

__all__ = ["FORMAT", "GoldenStore", "output_digest"]

FORMAT = "aoti-guard golden v2"  # v2: value pools, and the subsets of compact samples' outputs


def _nbytes(values: Sequence[Any]) -> int:
    return sum(int(t.numel() * t.element_size()) for t in values if hasattr(t, "element_size"))


@dataclass
class _Digest:
    name: str
    dtype: str
    shape: tuple[int, ...]
    stats: dict[str, Any]
    indices: Any  # int64 positions
    values: Any  # the reference there


@dataclass
class _Compact:
    sample: Sample
    captured: dict[str, Any]  # input name -> tensor stored whole
    digests: list[_Digest]


@dataclass
class GoldenStore:
    """The samples the package keeps, and a row per sample saying how (the build report's
    ``validate.detail.golden_storage``)."""

    contract: IOContract
    cap: int
    device: str | None = None  # where the digests' arithmetic runs (a CUDA build's GPU)
    full: list[Sample] = field(default_factory=list)
    compact: list[_Compact] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    used: int = 0  # bytes of whole tensors (full samples, captured inputs): what the cap bounds
    compact_bytes: int = 0  # bytes of pools and digests (outside the cap)

    def fits(self, s: Sample) -> bool:
        """Whether ``s`` would be stored whole."""
        return self.used + s.nbytes() <= self.cap

    def keep(self, s: Sample) -> Finding | None:
        """Store ``s`` whole, compact or not at all (its eager outputs are released unless stored
        whole); a warning when it is dropped."""
        if not s.outputs:
            return None
        if self.fits(s):
            self.full.append(s)
            self.used += s.nbytes()
            self.rows.append({"sample": s.id, "origin": s.origin, "stored": "full", "bytes": s.nbytes()})
            return None
        size = s.nbytes()
        why = self._compact(s)
        s.outputs = []
        if why is None:
            return None
        self.rows.append({"sample": s.id, "origin": s.origin, "stored": "dropped", "why": why})
        return warning(
            "build.sample_dropped",
            "validate",
            f"golden sample {s.id} not stored: {size} bytes would pass the {self.cap} byte cap, and {why}",
            expected=f"at most {self.cap - self.used} more bytes",
            found=f"{size} bytes",
            hint="raise --golden-max-mb to keep it",
        )

    def _compact(self, s: Sample) -> str | None:
        """Keep ``s`` compact; why not, when it cannot be."""
        import torch

        generated = {r.input for r in s.recipes} if s.origin == "generated" else set()
        captured = {
            spec.name: v
            for spec, v in zip(self.contract.inputs, s.leaves)
            if spec.kind == "tensor" and isinstance(v, torch.Tensor) and spec.name not in generated
        }
        captured_bytes = _nbytes(list(captured.values()))
        if self.used + captured_bytes > self.cap:
            return f"its captured inputs alone ({captured_bytes} bytes) would pass it"
        digests: list[_Digest] = []
        for spec, ref in zip(self.contract.outputs, s.outputs):
            if not isinstance(ref, torch.Tensor):
                continue
            if ref.is_complex():
                return f"output {spec.name!r} is complex, which has no compact form"
            at = _compact.positions(ref.numel(), s.worst.get(spec.name, ()))
            idx = torch.tensor(at, dtype=torch.int64)
            values = ref.detach().reshape(-1)[idx].clone()
            stats = _compact.reference_stats(ref, device=self.device)
            digests.append(_Digest(spec.name, str(ref.dtype).replace("torch.", ""), tuple(ref.shape), stats, idx, values))
        self.used += captured_bytes
        extra = sum(_nbytes([d.indices, d.values]) for d in digests) + _nbytes(list(s.pools.values()))
        self.compact_bytes += extra
        self.compact.append(_Compact(s, captured, digests))
        outputs = "; ".join(f"{d.name}: {d.indices.numel()} of {_numel(d.shape)} elements + stats" for d in digests)
        inputs = ", ".join(
            [*(f"{r.input} (recipe: {r.kind})" for r in s.recipes if r.input in generated), *(f"{n} (captured)" for n in captured)]
        )
        self.rows.append(
            {"sample": s.id, "origin": s.origin, "stored": "compact", "inputs": inputs, "outputs": outputs, "bytes": captured_bytes + extra}
        )
        return None

    def payload(self, tolerances: Sequence[Tolerance]) -> tuple[bytes, list[GoldenSample], list[CompactSample]] | None:
        """The golden file and its two indexes (whole samples, compact ones); None when nothing is
        kept. ``tolerances``: the package's, from which the digests' statistics tolerances follow."""
        import torch

        if not self.full and not self.compact:
            return None
        tensors: dict[str, Any] = {}
        index: list[GoldenSample] = []
        for i, s in enumerate(self.full):
            ins = _put(tensors, f"s{i}.in.", ((spec.name, v) for spec, v in zip(self.contract.inputs, s.leaves) if spec.kind == "tensor"))
            outs = _put(tensors, f"s{i}.out.", ((spec.name, v) for spec, v in zip(self.contract.outputs, s.outputs)))
            index.append(GoldenSample(s.id, ins, outs, dict(s.symbols)))
        compact: list[CompactSample] = []
        for j, c in enumerate(self.compact):
            for key, pool in c.sample.pools.items():
                tensors[key] = pool
            ins = _put(tensors, f"c{j}.in.", c.captured.items())
            digests = []
            for d in c.digests:
                tensors[f"c{j}.at.{d.name}"], tensors[f"c{j}.ref.{d.name}"] = d.indices, d.values
                tol = reference_tolerance(tolerances, d.name)
                place = DigestPlace(d.name, d.dtype, d.shape, f"c{j}.at.{d.name}", f"c{j}.ref.{d.name}")
                digests.append(output_digest(place, d.stats, tol))
            generated = [r for r in c.sample.recipes if r.input not in c.captured]
            compact.append(CompactSample(c.sample.id, dict(c.sample.symbols), c.sample.origin, ins, tuple(generated), tuple(digests)))
        del torch
        return _safetensors.dumps(tensors, {"format": FORMAT}), index, compact


@dataclass(frozen=True)
class DigestPlace:
    """Which output a compact digest is of, and its two keys in the golden file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    indices: str  # the golden file's key of the sampled positions
    values: str  # the golden file's key of the reference's values there


def output_digest(place: DigestPlace, stats: Mapping[str, Any], tol: Tolerance) -> OutputDigest:
    """A compact output's record: its golden-file keys (``place``), its reference's ``stats``
    (compact.reference_stats) and the statistics' tolerances that follow from the output's
    elementwise ``tol`` (compact.tolerances). The build and ``aoti-guard references`` both make
    their digests here."""
    sum_tol, minmax_tol = _compact.tolerances(stats, tol.atol, tol.rtol)
    return OutputDigest(
        place.name, place.dtype, place.shape, place.indices, place.values, int(stats["nonfinite"]),
        stats["sum"], stats["abs_sum"], stats["min"], stats["max"], sum_tol, minmax_tol,
    )  # fmt: skip


def _put(tensors: dict[str, Any], prefix: str, named: Any) -> dict[str, str]:
    import torch

    keys = {}
    for name, value in named:
        if isinstance(value, torch.Tensor):
            tensors[prefix + name] = value
            keys[name] = prefix + name
    return keys


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
