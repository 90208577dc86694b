"""The name each program constant has in the compiled package, paired by value where the compiler renamed it.

``torch.export`` names a plain tensor attribute by its attribute (``offset``); Inductor re-traces
the program and the package knows the same tensor as ``_tensor_constant0`` (its wrapper's
``original_fqn``, what ``get_constant_fqns()`` lists at load). A manifest that recorded only the
program's name told the probe to expect ``offset`` and to refuse ``_tensor_constant0``: a false
verdict on a correct package. Pairing by position or by shape would be a guess; the compiled
model's own bytes are the evidence, so a renamed constant is paired when its SHA-256, dtype and
shape equal exactly one program constant's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConstantNames", "Digest", "pair_renamed", "program_tensors", "tensor_digest"]

# {"sha256": hex, "dtype": "float32", "shape": [12]}: a constant's value, as the manifest hashes it
Digest = Mapping[str, Any]


@dataclass
class ConstantNames:
    """How the program's constants map onto the package's runtime constants."""

    renamed: dict[str, str] = field(default_factory=dict)  # program FQN -> the package's name, paired by value
    # the package's names that no program constant's value matched, with their digests: recorded
    # as they are, so the manifest lists what the package holds
    unpaired: dict[str, dict[str, Any]] = field(default_factory=dict)
    # program FQNs that two or more package constants (or none) could be: left as the program's
    ambiguous: list[str] = field(default_factory=list)


def pair_renamed(
    program: Sequence[str],
    loaded: Sequence[str],
    program_digest: Callable[[str], Digest],
    package_digests: Callable[[list[str]], Mapping[str, Digest]],
) -> ConstantNames:
    """Pair the program constants the package does not list by name with the package constants
    the program does not name, by value. ``program``: the program's tensor FQNs; ``loaded``: the
    names the loaded model lists; ``program_digest``: one program tensor's digest;
    ``package_digests``: reads the package's own values for the names given. Nothing is hashed
    unless the package lists a name the program lacks: the usual build never pays for it."""
    out = ConstantNames()
    extra = sorted(set(loaded) - set(program))
    if not extra:
        return out
    missing = sorted(set(program) - set(loaded))
    package = {name: dict(d) for name, d in package_digests(extra).items()}
    by_value: dict[tuple[str, str, tuple[int, ...]], list[str]] = {}
    for name, d in package.items():
        by_value.setdefault(_key(d), []).append(name)
    taken: set[str] = set()
    for fqn in missing:
        candidates = [n for n in by_value.get(_key(program_digest(fqn)), []) if n not in taken]
        if len(candidates) == 1:
            out.renamed[fqn] = candidates[0]
            taken.add(candidates[0])
        elif len(candidates) > 1:
            # two package constants hold the same bytes: either name would be a guess
            out.ambiguous.append(fqn)
    out.unpaired = {name: d for name, d in package.items() if name not in taken}
    return out


def _key(d: Digest) -> tuple[str, str, tuple[int, ...]]:
    return (str(d.get("sha256")), str(d.get("dtype")), tuple(int(n) for n in d.get("shape") or ()))


def program_tensors(ep: Any) -> dict[str, Any]:
    """Every tensor the exported program holds by FQN: parameters, buffers, lifted constants."""
    import torch

    tensors = {fqn: t for fqn, t in ep.state_dict.items() if isinstance(t, torch.Tensor)}
    tensors.update({fqn: t for fqn, t in ep.constants.items() if isinstance(t, torch.Tensor)})
    return tensors


def tensor_digest(t: Any) -> dict[str, Any]:
    """A tensor's digest in the manifest's terms (``contract.tensor_sha256``)."""
    from aoti_guard.builder.export.contract import dtype_name, tensor_sha256

    return {"sha256": tensor_sha256(t), "dtype": dtype_name(t.dtype), "shape": [int(n) for n in t.shape]}
