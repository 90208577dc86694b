"""Constants serialised with more bytes than they hold (pytorch#186176): a package several times
larger than its weights.

AOTInductor writes each runtime constant with its whole storage (``_constant_nbytes`` in
torch/_inductor/codecache.py: ``t.untyped_storage().nbytes()``), not its own elements. A parameter
that is a view of a larger tensor (``nn.Parameter(big[:, :10])``) carries all of ``big``; an RNN
whose parameters are views of one flat buffer (``flatten_parameters()`` on cuDNN) carries the whole
buffer once per parameter (a GRU of 4.7 MB of weights made a 20 MB .so on torch 2.13). Buffers are
cloned first (compile_fx keeps their initial values), so only a strided buffer keeps its gaps. The package still loads and computes right, so nothing else
notices: the build compares each constant's own bytes (numel x itemsize) with its storage's and
names the ones that differ, with the fix (give each its own storage before export).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aoti_guard.builder.compile.constant_names import program_tensors
from runtime_probe.package.manifest import ConstantSpec
from runtime_probe.package.weights import configs_carry_weights
from runtime_probe.reporting.findings import Finding, warning

__all__ = ["ConstantBytes", "constant_bytes", "oversized_constants", "oversized_finding", "serialised_nbytes"]

_NAMED = 8  # constants named in the message; every one is in the evidence


@dataclass(frozen=True)
class ConstantBytes:
    """One runtime constant: the bytes its values take and the bytes the package writes for it."""

    name: str  # the name the loaded model knows it by (load_constants takes it)
    held: int  # numel x itemsize
    serialised: int  # its whole storage

    @property
    def excess(self) -> int:
        return self.serialised - self.held


def serialised_nbytes(t: Any, kind: str) -> int:
    """What AOTInductor writes for constant ``t`` of ``kind`` (torch 2.13's codecache.py and
    compile_fx.py): a parameter's or lifted constant's whole storage; for a buffer, the
    stride-preserving clone compile_fx keeps of it (buffers may be mutated), which spans its
    first element to its last (a contiguous slice is compact, a strided one keeps its gaps);
    nothing for an empty tensor. An mkldnn tensor has no storage to share: its own bytes."""
    if t.numel() == 0:
        return 0
    if getattr(t, "is_mkldnn", False):
        return int(t.numel() * t.element_size())
    if kind == "buffer":
        span = sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1
        return int(span * t.element_size())
    return int(t.untyped_storage().nbytes())


def constant_bytes(ep: Any, constants: Sequence[ConstantSpec]) -> list[ConstantBytes]:
    """Held vs serialised bytes of every constant the package keeps as a runtime constant (an
    inlined one is code, not a blob)."""
    tensors = program_tensors(ep)
    rows = []
    for c in constants:
        t = tensors.get(c.fqn)
        if c.storage == "package" and t is not None:
            rows.append(ConstantBytes(c.loaded_name, int(t.numel() * t.element_size()), serialised_nbytes(t, c.kind)))
    return rows


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 10_000 else f"{n} bytes"


def oversized_finding(rows: Sequence[ConstantBytes]) -> Finding | None:
    """``build.constant_storage_oversized`` naming every constant serialised with more bytes than
    it holds, its bytes and its storage's, and the total excess; None when there is none."""
    over = sorted((r for r in rows if r.excess > 0), key=lambda r: -r.excess)
    if not over:
        return None
    excess = sum(r.excess for r in over)
    held = sum(r.held for r in rows)
    named = "; ".join(f"{r.name} holds {_mb(r.held)}, serialised with its storage's {_mb(r.serialised)}" for r in over[:_NAMED])
    more = f"; and {len(over) - _NAMED} more (evidence)" if len(over) > _NAMED else ""
    return warning(
        "build.constant_storage_oversized",
        "package",
        f"{len(over)} constant(s) use only part of their storage (a view of a larger tensor) and AOTInductor serialises each "
        "with all of it: "
        f"the package carries {_mb(excess)} more than its constants' {_mb(held)} ({named}{more})",
        expected="each constant serialised with its own bytes",
        found=f"{_mb(held + excess)} serialised for {_mb(held)} of values ({_mb(excess)} excess)",
        hint="give each constant its own storage before export: in the factory, `p.data = p.data.clone()` for each "
        "parameter of an RNN after flatten_parameters(), and `nn.Parameter(big[:, :n].clone())` / `.contiguous()` for a view; "
        "the package then shrinks by the excess",
        evidence={
            "excess_bytes": excess,
            "constants": [{"name": r.name, "bytes": r.held, "storage_bytes": r.serialised} for r in over],
        },
    )


def oversized_constants(ep: Any, constants: Sequence[ConstantSpec], configs: Mapping[str, Any]) -> list[Finding]:
    """The package step's check: nothing for a package without its weights (no blob is written)."""
    if not configs_carry_weights(configs) and configs.get("aot_inductor.package_constants_on_disk_format") != "binary_blob":
        return []
    finding = oversized_finding(constant_bytes(ep, constants))
    return [] if finding is None else [finding]
