"""New weights against the package's constants, BEFORE anything reaches ``load_constants``.

torch's ``load_constants`` checks neither shapes nor dtypes, and a mismatch corrupts the heap
(seen: "corrupted size vs. prev_size"). ``plan_weights`` is the one decision about a set of new
weights (a safetensors file's header, or a name -> tensor map): which package constant takes which
given tensor, which keep the package's value, and what is refused, by name. The probe's
``--weights`` (``check_weights``, from the file's header alone, with the standard library) and the
guarded loader (``GuardedModel.load_constants``, from tensors) both go through it.

The files users have are checkpoints: a ``state_dict()`` or a ``save_pretrained`` safetensors file.
Neither holds a non-persistent buffer (a rotary ``inv_freq``) or a lifted tensor constant, and
``save_pretrained`` drops the tied copy of a weight (``lm_head.weight`` = ``embed_tokens.weight``).
The manifest records both facts (``ConstantSpec.in_state_dict``, ``tied_with``, since 1.7): a
constant no checkpoint holds keeps the package's value, and a tied constant takes the tensor of
any of its names the weights hold. A manifest without them (an older build) asks for every
package constant, as before.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from runtime_probe.formats import safetensors as _safetensors
from runtime_probe.package.manifest import ConstantSpec, Manifest
from runtime_probe.reporting.findings import Finding, error, has_errors, info

__all__ = [
    "ValueChecks",
    "WeightsCheck",
    "WeightsPlan",
    "carries_weights",
    "check_weights",
    "configs_carry_weights",
    "keeps_unsaved",
    "plan_weights",
]

PHASE = "constants"

# how many names a finding's message lists before "and N more"
_LISTED = 8


def carries_weights(manifest: Manifest) -> bool:
    """The package's .so holds its constants' values: False for a build with
    ``aot_inductor.package_constants_in_so=False``, whose constants are unset until
    ``load_constants`` (a call before that reads unset memory: SIGSEGV)."""
    return configs_carry_weights(manifest.inductor_configs)


def configs_carry_weights(configs: Mapping[str, object]) -> bool:
    """``carries_weights`` from Inductor configs (the build's, or the manifest's strings)."""
    return str(configs.get("aot_inductor.package_constants_in_so")) != "False"


def keeps_unsaved(manifest: Manifest) -> bool:
    """The package has values for its constants that no checkpoint holds (non-persistent buffers,
    lifted tensor constants): in its .so, or, without weights, in ``manifest.kept_constants``."""
    return carries_weights(manifest) or manifest.kept_constants is not None


@dataclass(frozen=True)
class WeightsPlan:
    """What new weights do to the package's constants.

    ``sources``: package constant (the name ``load_constants`` takes) -> the given name whose
    tensor it takes: its own, or a tied name's. ``kept``: package constants that no checkpoint
    holds and the weights do not give: the package's values stay. ``tied``: constants filled from
    a tied name ({constant: given name}). ``findings``: the refusals (errors) and what was taken
    from where (info)."""

    findings: list[Finding] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    kept: tuple[str, ...] = ()
    tied: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """The given names whose tensors are loaded."""
        return sorted(set(self.sources.values()))


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


@dataclass(frozen=True)
class ValueChecks:
    """How the caller compares tensor values (a file's bytes by hash, tensors in memory).

    ``same_tensor``: ``(a, b) -> bool``, whether two given names hold equal values; two names of
    one tied tensor must (the package keeps one tensor for both). None: not compared.
    ``build_value``: ``(name, spec) -> bool``, whether a given tensor holds the build's value (its
    bytes' SHA-256 is ``spec.sha256``): a constant compiled into the code at build time accepts
    only that value. None: any value of such a constant is refused."""

    same_tensor: Callable[[str, str], bool] | None = None
    build_value: Callable[[str, ConstantSpec], bool] | None = None


@dataclass(frozen=True)
class _Constants:
    """The manifest's constants by name: ``wanted`` (the package's, by the name
    ``load_constants`` takes) and ``by_name`` (every constant, by either name)."""

    wanted: dict[str, ConstantSpec]
    by_name: dict[str, ConstantSpec]

    @classmethod
    def of(cls, constants: Sequence[ConstantSpec]) -> _Constants:
        wanted = {c.loaded_name: c for c in constants if c.storage == "package"}
        return cls(wanted, {c.fqn: c for c in constants} | wanted)

    def tied_given(self, c: ConstantSpec, given: Mapping[str, object]) -> list[str]:
        """The given names of ``c``'s tied tensor (the names ``load_constants`` would take)."""
        names = [self.by_name[a].loaded_name for a in c.tied_with if a in self.by_name]
        return [n for n in names if n in given and n != c.loaded_name]


def plan_weights(
    given: Mapping[str, tuple[str, Sequence[int]]],
    constants: Sequence[ConstantSpec],
    *,
    source: str,
    full: bool = True,
    keeps: bool = True,
    values: ValueChecks = ValueChecks(),
) -> WeightsPlan:
    """New weights ({name: (dtype name, shape)}) against the package's constants.

    Args:
        given: the names the weights hold, with each tensor's dtype and shape.
        constants: the manifest's constants.
        source: how messages name the weights ("the weights file").
        full: every package constant must be given (or kept, or tied to a given name).
        keeps: the package has values for the constants no checkpoint holds (``keeps_unsaved``);
            when it has not, such a constant cannot keep "the package's value": it must be given.
        values: how the caller compares tensor values (``ValueChecks``).

    Returns:
        The plan; its ``findings`` hold an error for every name that is missing, not the
        model's, reshaped or retyped, each naming the constant in ``evidence["constant"]``.
    """
    names = _Constants.of(constants)
    plan = _assign(given, names, source=source, full=full, keeps=keeps)
    findings = plan.findings + _extra_given(given, names, values.build_value, source)
    findings += _kinds(given, names.by_name, source)
    findings += _ties(given, names.wanted, names.by_name, values.same_tensor, source)
    if plan.kept or plan.tied:
        findings.append(_taken_from_package(list(plan.kept), plan.tied, names.wanted, names.by_name, source))
    return WeightsPlan(findings, plan.sources, plan.kept, plan.tied)


def _assign(given: Mapping[str, object], names: _Constants, *, source: str, full: bool, keeps: bool) -> WeightsPlan:
    """Which given name each package constant takes (its own, or a tied name's), which keep the
    package's value, and the constants missing (``findings``)."""
    findings: list[Finding] = []
    sources: dict[str, str] = {}
    tied: dict[str, str] = {}
    kept: list[str] = []
    for name, c in sorted(names.wanted.items()):
        if name in given:
            sources[name] = name
            continue
        partners = names.tied_given(c, given)
        if partners:
            sources[name] = tied[name] = partners[0]
        elif c.in_state_dict is False and keeps:
            kept.append(name)
        elif full:
            findings.append(_missing(name, c, source))
    return WeightsPlan(findings, sources, tuple(kept), tied)


def _extra_given(
    given: Mapping[str, object], names: _Constants, build_value: Callable[[str, ConstantSpec], bool] | None, source: str
) -> list[Finding]:
    """The given names that are no package constant: a tied name (fine), the program's name of a
    renamed constant, a constant inlined at build time (its build value: info), or unknown."""
    findings: list[Finding] = []
    by_name, wanted = names.by_name, names.wanted
    for name in sorted(set(given) - set(wanted)):
        spec = by_name.get(name)
        if spec is not None and any(a in by_name and by_name[a].loaded_name in wanted for a in spec.tied_with):
            continue  # a tied name of a package constant: its tensor is that constant's (above)
        if spec is not None and spec.storage == "package":  # the program's name of a constant the compiler renamed
            findings.append(_renamed(name, spec, source))
            continue
        if spec is not None and build_value is not None and build_value(name, spec):
            findings.append(
                info(
                    "constants.unexpected",
                    PHASE,
                    f"{name!r} was inlined into the compiled code at build time; {source} holds the same value, which is not loaded",
                    evidence={"constant": name},
                )
            )
            continue
        findings.append(_unexpected(name, spec, source))
    return findings


def _missing(name: str, c: ConstantSpec, source: str) -> Finding:
    if c.in_state_dict is False:
        # only a package without weights built before 1.7 asks for one: it has no value of its own to keep
        what = "a non-persistent buffer" if c.kind == "buffer" else "a tensor constant of the model"
        message = f"{source} has no tensor {name!r}, {what} that no state_dict() holds, and this package carries no weights to keep it from"
        hint = (
            f"add {name!r} to the weights (its value: the model's {'get_buffer' if c.kind == 'buffer' else 'attribute'} "
            f"{c.fqn!r}), or build the package with its weights in the .so (without package_constants_in_so=False), "
            "whose value then stays"
        )
    else:
        message = f"{source} has no tensor {name!r}"
        hint = (
            "give every tensor of the model's state_dict(): a state_dict() or save_pretrained safetensors file of this model "
            "(the manifest of this package does not record which constants a checkpoint lacks: rebuild it with this aoti-guard to "
            "accept one as it is)"
            if c.in_state_dict is None
            else "give every tensor of the model's state_dict(): the weights are of another model or incomplete"
        )
    return error(
        "constants.missing",
        PHASE,
        message,
        expected=f"{name}: {c.dtype}{list(c.shape)}",
        found="absent",
        hint=hint,
        evidence={"constant": name},
    )


def _unexpected(name: str, spec: ConstantSpec | None, source: str) -> Finding:
    if spec is not None:  # a constant compiled into the code: a new value cannot take effect
        return error(
            "constants.unexpected",
            PHASE,
            f"{source} has a tensor {name!r} that was inlined into the compiled code at build time: "
            "a value other than the build's cannot take effect",
            expected=f"the build's value of {name} (sha256 {spec.sha256[:16]}…) or none",
            found=name,
            hint="rebuild the package with these weights (aoti-guard build), or leave this tensor out to keep the build's value",
            evidence={"constant": name},
        )
    return error(
        "constants.unexpected",
        PHASE,
        f"{source} has a tensor {name!r} that is not a constant of this model",
        expected="only the model's constants",
        found=name,
        hint="the weights belong to another model or version; check the model and the weights match",
        evidence={"constant": name},
    )


def _renamed(name: str, spec: ConstantSpec, source: str) -> Finding:
    return error(
        "constants.unexpected",
        PHASE,
        f"{source} has a tensor {name!r}, which the package lists as {spec.loaded_name!r} (the compiler renamed it)",
        expected=spec.loaded_name,
        found=name,
        hint=f"name it {spec.loaded_name!r}, the name get_constant_fqns() lists and load_constants takes",
        evidence={"constant": name},
    )


def _kinds(given: Mapping[str, tuple[str, Sequence[int]]], by_name: Mapping[str, ConstantSpec], source: str) -> list[Finding]:
    """Each given tensor's dtype and shape against its constant's (a tied name's own spec: the
    same tensor, so the same dtype and shape)."""
    findings: list[Finding] = []
    for name, (dtype, shape) in given.items():
        spec = by_name.get(name)
        if spec is None:
            continue
        if dtype != spec.dtype:
            findings.append(
                error(
                    "constants.dtype_mismatch",
                    PHASE,
                    f"{name} is {dtype} in {source}",
                    expected=spec.dtype,
                    found=dtype,
                    hint=f"convert it to {spec.dtype}, the dtype the package was compiled for (loading it as is would corrupt memory)",
                    evidence={"constant": name},
                )
            )
        if tuple(shape) != tuple(spec.shape):
            findings.append(
                error(
                    "constants.shape_mismatch",
                    PHASE,
                    f"{name} has shape {list(shape)} in {source}",
                    expected=str(list(spec.shape)),
                    found=str(list(shape)),
                    hint="the weights come from a differently configured model; loading them would corrupt memory",
                    evidence={"constant": name},
                )
            )
    return findings


def _ties(
    given: Mapping[str, tuple[str, Sequence[int]]],
    wanted: Mapping[str, ConstantSpec],
    by_name: Mapping[str, ConstantSpec],
    same_tensor: Callable[[str, str], bool] | None,
    source: str,
) -> list[Finding]:
    """Two given names of one tied tensor must hold the same value: the package computes both
    uses (an embedding and an output projection) from one tensor."""
    if same_tensor is None:
        return []
    findings: list[Finding] = []
    for name in sorted(wanted):
        c = wanted[name]
        if name not in given:
            continue
        for other in sorted({by_name[a].loaded_name for a in c.tied_with if a in by_name} - {name}):
            if other in given and other not in wanted and not same_tensor(name, other):
                findings.append(
                    error(
                        "constants.tied_mismatch",
                        PHASE,
                        f"{name} and {other} are one tied tensor in the package, and {source} holds different values for them",
                        expected=f"{name} == {other}",
                        found="different values",
                        hint=f"the package computes both from {name}: give one of the two names, or the same tensor under both "
                        "(untied weights need a model built untied)",
                        evidence={"constant": name, "tied_with": other},
                    )
                )
    return findings


def _taken_from_package(
    kept: Sequence[str], tied: Mapping[str, str], wanted: Mapping[str, ConstantSpec], by_name: Mapping[str, ConstantSpec], source: str
) -> Finding:
    parts = []
    if kept:
        parts.append(f"{len(kept)} constant(s) no state_dict() holds keep the package's values: {_listed(list(kept))}")
    if tied:
        pairs = [f"{c} <- {g}" for c, g in sorted(tied.items())]
        parts.append(f"{len(tied)} tied constant(s) take their tied tensor from {source}: {_listed(pairs)}")
    return info(
        "constants.from_package",
        PHASE,
        "; ".join(parts),
        evidence={"kept": list(kept), "tied": dict(tied)},
    )


@dataclass
class WeightsCheck:
    findings: list[Finding] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # the file's tensors to load
    sources: dict[str, str] = field(default_factory=dict)  # package constant -> the file's tensor it takes
    same_as_build: bool = False  # every constant loaded or kept holds the build's bytes


def check_weights(path: str, constants: Sequence[ConstantSpec], *, keeps: bool = True, compare_build: bool = True) -> WeightsCheck:
    """A safetensors file against the package's constants, from its header (and its bytes'
    hashes): ``plan_weights``. ``keeps``: the package has values for the constants no
    checkpoint holds (``keeps_unsaved``). ``compare_build``: hash every tensor loaded to tell whether they are
    the build's (``same_as_build``: the golden references apply); the guarded loader skips it."""
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
    digests: dict[str, str] = {}

    def digest(name: str) -> str:
        if name not in digests:
            t = header.tensors[name]
            digests[name] = _sha256_of(path, header.data_start + t.begin, t.end - t.begin)
        return digests[name]

    given = {name: (t.torch_dtype_name, tuple(t.shape)) for name, t in header.tensors.items()}
    plan = plan_weights(
        given,
        constants,
        source="the weights file",
        keeps=keeps,
        values=ValueChecks(
            same_tensor=lambda a, b: _nbytes(header, a) == _nbytes(header, b) and digest(a) == digest(b),
            build_value=lambda name, spec: _nbytes(header, name) == spec.nbytes and digest(name) == spec.sha256,
        ),
    )
    result.findings += plan.findings
    result.names, result.sources = plan.names, plan.sources
    if has_errors(result.findings) or not compare_build:
        return result
    # the golden references still apply only if every constant loaded holds the build's bytes
    # (one kept holds them by definition)
    wanted = {c.loaded_name: c for c in constants if c.storage == "package"}
    result.same_as_build = all(
        _nbytes(header, src) == wanted[dst].nbytes and digest(src) == wanted[dst].sha256 for dst, src in plan.sources.items()
    )
    return result


def _nbytes(header: _safetensors.Header, name: str) -> int:
    t = header.tensors[name]
    return t.end - t.begin


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
