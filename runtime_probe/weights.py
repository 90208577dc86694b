"""Validating a weights file (safetensors) against the contract BEFORE ``load_constants``.

torch's ``load_constants`` checks neither shapes nor dtypes, and a mismatch corrupts the heap
(seen: "corrupted size vs. prev_size"). So names, shapes and dtypes are checked here from the file's
header alone, with the standard library; the tensors are hashed from their raw bytes to tell
whether the golden references (computed with the build's weights) still apply.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import _safetensors
from .findings import Finding, error, has_errors, info
from .manifest import ConstantSpec

__all__ = ["WeightsCheck", "check_weights"]

PHASE = "constants"


@dataclass
class WeightsCheck:
    findings: list[Finding] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # what to load
    same_as_build: bool = False  # every tensor's bytes equal the build's


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
    wanted = {c.fqn: c for c in constants if c.storage == "package"}
    inlined = {c.fqn for c in constants if c.storage != "package"}
    for fqn in sorted(set(wanted) - set(header.tensors)):
        c = wanted[fqn]
        result.findings.append(
            error(
                "constants.missing",
                PHASE,
                f"the weights file has no tensor {fqn!r}",
                expected=f"{fqn}: {c.dtype}{list(c.shape)}",
                found="absent",
                hint="save every constant the model has (get_constant_fqns lists them)",
                evidence={"constant": fqn},
            )
        )
    for name in sorted(set(header.tensors) - set(wanted)):
        if name in inlined:
            result.findings.append(
                info(
                    "constants.unexpected",
                    PHASE,
                    f"{name!r} was inlined into the compiled code at build time; the file's value is ignored",
                    evidence={"constant": name},
                )
            )
            continue
        result.findings.append(
            error(
                "constants.unexpected",
                PHASE,
                f"the weights file has a tensor {name!r} the model does not have",
                expected="only the model's constants",
                found=name,
                hint="the file belongs to another model or version; check the model and the weights match",
                evidence={"constant": name},
            )
        )
    same = True
    with open(path, "rb") as fh:
        for fqn, c in wanted.items():
            t = header.tensors.get(fqn)
            if t is None:
                same = False
                continue
            if t.torch_dtype_name != c.dtype:
                result.findings.append(
                    error(
                        "constants.dtype_mismatch",
                        PHASE,
                        f"{fqn} is {t.torch_dtype_name} in the weights file",
                        expected=c.dtype,
                        found=t.torch_dtype_name,
                        hint="convert the tensor to the dtype the package was compiled for (loading it as is would corrupt memory)",
                        evidence={"constant": fqn},
                    )
                )
                same = False
            if tuple(t.shape) != tuple(c.shape):
                result.findings.append(
                    error(
                        "constants.shape_mismatch",
                        PHASE,
                        f"{fqn} has shape {list(t.shape)} in the weights file",
                        expected=str(list(c.shape)),
                        found=str(list(t.shape)),
                        hint="the weights come from a differently configured model; loading them would corrupt memory",
                        evidence={"constant": fqn},
                    )
                )
                same = False
            if same and t.end - t.begin == c.nbytes:
                fh.seek(header.data_start + t.begin)
                digest = hashlib.sha256()
                remaining = t.end - t.begin
                while remaining > 0:
                    chunk = fh.read(min(remaining, 1 << 20))
                    if not chunk:
                        break
                    digest.update(chunk)
                    remaining -= len(chunk)
                same = same and digest.hexdigest() == c.sha256
    result.names = sorted(set(wanted) & set(header.tensors))
    result.same_as_build = same and not has_errors(result.findings)
    return result
