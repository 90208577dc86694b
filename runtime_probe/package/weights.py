"""Validating a weights file (safetensors) against the contract BEFORE ``load_constants``.

torch's ``load_constants`` checks neither shapes nor dtypes, and a mismatch corrupts the heap
(seen: "corrupted size vs. prev_size"). So names, shapes and dtypes are checked here from the file's
header alone, with the standard library; the tensors are hashed from their raw bytes to tell
whether the golden references (computed with the build's weights) still apply.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from runtime_probe.findings import Finding, error, has_errors, info
from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import ConstantSpec

__all__ = ["WeightsCheck", "check_weights", "constant_problems"]

PHASE = "constants"


@dataclass
class WeightsCheck:
    findings: list[Finding] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # what to load
    same_as_build: bool = False  # every tensor's bytes equal the build's


def constant_problems(
    given: Mapping[str, tuple[str, Sequence[int]]],
    constants: Sequence[ConstantSpec],
    *,
    source: str,
    full: bool = True,
    refuse_inlined: bool = False,
) -> list[Finding]:
    """New weights ({fqn: (dtype name, shape)}) against the package's constants: missing (when
    ``full``), unexpected, dtype and shape, each a finding naming the constant in ``evidence``.

    A constant inlined into the compiled code at build time cannot be replaced: from a weights file
    its value is ignored (info); handed to ``load_constants`` directly it is refused
    (``refuse_inlined``), since the caller expects it to take effect.
    """
    findings: list[Finding] = []
    wanted = {c.loaded_name: c for c in constants if c.storage == "package"}
    inlined = {c.fqn for c in constants if c.storage != "package"}
    if full:
        for fqn in sorted(set(wanted) - set(given)):
            c = wanted[fqn]
            findings.append(
                error(
                    "constants.missing",
                    PHASE,
                    f"{source} has no tensor {fqn!r}",
                    expected=f"{fqn}: {c.dtype}{list(c.shape)}",
                    found="absent",
                    hint="give every constant the model has (get_constant_fqns lists them)",
                    evidence={"constant": fqn},
                )
            )
    for name in sorted(set(given) - set(wanted)):
        if name in inlined and not refuse_inlined:
            findings.append(
                info(
                    "constants.unexpected",
                    PHASE,
                    f"{name!r} was inlined into the compiled code at build time; the value in {source} is ignored",
                    evidence={"constant": name},
                )
            )
            continue
        why = (
            "was inlined into the compiled code at build time and cannot be replaced"
            if name in inlined
            else "is not a constant of this model"
        )
        findings.append(
            error(
                "constants.unexpected",
                PHASE,
                f"{source} has a tensor {name!r} that {why}",
                expected="only the model's constants",
                found=name,
                hint="the weights belong to another model or version; check the model and the weights match",
                evidence={"constant": name},
            )
        )
    for fqn, (dtype, shape) in given.items():
        spec = wanted.get(fqn)
        if spec is None:
            continue
        if dtype != spec.dtype:
            findings.append(
                error(
                    "constants.dtype_mismatch",
                    PHASE,
                    f"{fqn} is {dtype} in {source}",
                    expected=spec.dtype,
                    found=dtype,
                    hint=f"convert it to {spec.dtype}, the dtype the package was compiled for (loading it as is would corrupt memory)",
                    evidence={"constant": fqn},
                )
            )
        if tuple(shape) != tuple(spec.shape):
            findings.append(
                error(
                    "constants.shape_mismatch",
                    PHASE,
                    f"{fqn} has shape {list(shape)} in {source}",
                    expected=str(list(spec.shape)),
                    found=str(list(shape)),
                    hint="the weights come from a differently configured model; loading them would corrupt memory",
                    evidence={"constant": fqn},
                )
            )
    return findings


def check_weights(path: str, constants: Sequence[ConstantSpec]) -> WeightsCheck:
    result = WeightsCheck()
    try:
        header = _safetensors.read_header(path)
    except FileNotFoundError:
        result.findings.append(error("constants.unreadable", PHASE, f"no weights file {path}", hint="check the --weights path"))
        return result
    except (_safetensors.SafetensorsError, OSError) as exc:
        result.findings.append(
            error(
                "constants.unreadable",
                PHASE,
                f"the weights file cannot be read: {exc}",
                expected="a safetensors file",
                found=os.path.basename(path),
                hint="write it with safetensors.torch.save_file(model.state_dict(), path)",
            )
        )
        return result
    wanted = {c.loaded_name: c for c in constants if c.storage == "package"}
    given = {name: (t.torch_dtype_name, tuple(t.shape)) for name, t in header.tensors.items()}
    result.findings += constant_problems(given, constants, source="the weights file")
    result.names = sorted(set(wanted) & set(header.tensors))
    # the golden references still apply only if every tensor's bytes are the build's
    result.same_as_build = not has_errors(result.findings) and all(_same_bytes(path, header, c) for c in wanted.values())
    return result


def _same_bytes(path: str, header: _safetensors.Header, c: ConstantSpec) -> bool:
    t = header.tensors[c.loaded_name]
    size = t.end - t.begin
    return size == c.nbytes and _sha256_of(path, header.data_start + t.begin, size) == c.sha256


def _sha256_of(path: str, offset: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(offset)
        remaining = size
        while remaining > 0:
            chunk = fh.read(min(remaining, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            remaining -= len(chunk)
    return digest.hexdigest()
