"""The manifest: the contract a package carries (schema MAJOR.MINOR, see MANIFEST_SCHEMA_VERSION).

Bump MINOR when adding an optional field (older readers ignore it); bump MAJOR when a field is
removed, renamed or changes meaning. Readers refuse a newer MAJOR with a finding
(``manifest.unsupported_version``), never with a traceback. docs/manifest.md describes each field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from runtime_probe.formats.numbers import NumberError, schema_version
from runtime_probe.formats.serde import SerdeError, from_jsonable, to_jsonable

__all__ = [
    "MANIFEST_SCHEMA_VERSION",
    "CheckTolerance",
    "CompactSample",
    "ConstantSpec",
    "DataCheck",
    "Dim",
    "Golden",
    "GoldenSample",
    "IOContract",
    "InputRecipe",
    "InputSpec",
    "KernelImage",
    "Manifest",
    "ManifestError",
    "NonfiniteBaseline",
    "OutputDigest",
    "OutputSpec",
    "ParamSpec",
    "References",
    "ShapeGuard",
    "Symbol",
    "Target",
    "TensorSpec",
    "Tolerance",
    "Toolchain",
    "TwinInfo",
    "UserCode",
    "dump_manifest",
    "parse_manifest",
    "reference_tolerance",
]

# 1.1: TensorSpec.value_range; 1.2: Target.cuda_archs; 1.3: debug_twin_without_weights;
# 1.4: IOContract.guards (a 1.3 reader ignores them: it accepts what the guards refuse, as a bare AOTI load does)
# 1.5: Golden.compact_samples (a 1.4 reader ignores them and checks the full samples alone, which
# is what a 1.4 build stored: never a false verdict on a sample it cannot read); TwinInfo.nonfinite
# (a 1.4 reader ignores it: its twin asserts on the first NaN/Inf, a printer twin it reads as names only)
# 1.6: ConstantSpec.runtime_fqn (a 1.5 reader ignores it and expects the program's name: it
# reports a renamed constant as unexpected, as every 1.5 probe did)
# 1.7: Tolerance.origin and Tolerance.build_check (a 1.6 reader ignores them: it applies atol/rtol
# as before; the build check's atol/rtol leave the validation table's rows for build_check)
# 1.7 also: ConstantSpec.in_state_dict and tied_with (a 1.6 reader ignores them and asks a weights file
# for every package constant, as every 1.6 probe did: a state_dict() file of a model with a
# non-persistent buffer or tied weights is refused, never loaded wrong); Manifest.kept_constants
# (a 1.6 reader ignores the entry and asks the weights for those constants)
# 1.8: Manifest.user_code (a 1.7 reader ignores it: its probe runs no memcheck, as every 1.7 probe did)
# 1.8: Golden.references (references made for weights given at load by `aoti-guard references`; a
# 1.7 reader ignores it: with those weights it compares, as the constants' digests are theirs;
# without them it compares the .so's own weights with references made for others and fails,
# never passes falsely)
# 1.8: Symbol.value_of and IOContract.data_checks: the model's own checks on input values
# (torch._check(b < y.shape[0]) with b = x.item()); a 1.7 reader ignores them and lets the native
# code refuse such a call with torch's message over internal symbols (``Expected u0 < s17``)
MANIFEST_SCHEMA_VERSION = "1.8"
_OUR_MAJOR = schema_version(MANIFEST_SCHEMA_VERSION, "MANIFEST_SCHEMA_VERSION", "1.8")[0]
# A real manifest is ~5 KB plus ~300 bytes per constant; the cap bounds what parsing a hostile one costs.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


class ManifestError(ValueError):
    """The manifest cannot be used. ``code`` is ``manifest.invalid`` or ``manifest.unsupported_version``."""

    def __init__(self, code: str, message: str, *, found: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.found = found


@dataclass(frozen=True)
class Dim:
    """A symbolic size: ``expr`` over the contract's symbols (``batch``, ``2*batch``), with its range.

    ``max`` is None when the range is unbounded above.
    """

    expr: str
    min: int
    max: int | None


@dataclass(frozen=True)
class TensorSpec:
    dtype: str  # torch dtype name: "float32", "bfloat16", "int64", "bool"...
    shape: tuple[int | Dim, ...]
    stride: tuple[int | str, ...]  # ints, or expressions over the symbols
    contiguous: bool
    device: str  # device type: "cpu", "cuda"
    # Integer inputs that index a table (embedding, gather, index_select): the valid values,
    # inclusive ([0, rows - 1]); None when the build recorded none. Since schema 1.1.
    value_range: tuple[int, int] | None = None


@dataclass(frozen=True)
class ParamSpec:
    """A parameter of forward(), and how it was passed at export time."""

    name: str
    kind: str  # "positional_only" | "positional_or_keyword" | "keyword_only" | "var_positional" | "var_keyword"
    passed: str  # "positional" | "keyword" | "omitted"


@dataclass(frozen=True)
class InputSpec:
    """One leaf of the flattened (args, kwargs): a tensor, or a non-tensor the model is specialized on."""

    name: str  # "x", "xs[1]", "cfg['scale']"
    param: str  # the forward() parameter it belongs to
    kind: str  # "tensor" | "constant"
    index: int | None = None  # position among AOTI's tensor inputs (input_handles[i])
    tensor: TensorSpec | None = None
    value: Any = None  # JSON value of a constant leaf


@dataclass(frozen=True)
class OutputSpec:
    name: str  # "output", "output[0]", "output['logits']"
    tensor: TensorSpec | None
    value: Any = None


@dataclass(frozen=True)
class Symbol:
    """A dynamic dimension: its range and the inputs that carry it (``x.shape[0]``)."""

    name: str
    min: int
    max: int | None
    sources: tuple[str, ...] = ()
    # The input leaf whose value this symbol is (``b = x.item()``: "x"), for a data-dependent
    # check; None: a size. Since schema 1.8.
    value_of: str | None = None


@dataclass(frozen=True)
class ShapeGuard:
    """A condition on the input sizes that torch.export assumed and AOTInductor does not check
    (``ExportedProgram._guards_code``): the package computes the branch export traced, whatever
    the sizes. Since schema 1.4.

    ``expr`` is the condition over the contract's symbols in runtime_probe/formats/symexpr.py's
    condition grammar (``h*w == 64``); None when it could not be translated (the build then fails:
    nothing can enforce it).
    """

    text: str  # torch's own text: "(L['x'].size()[1]*L['x'].size()[2]) == 64"
    expr: str | None  # "h*w == 64"
    words: str  # "h*w must equal 64"
    arguments: tuple[str, ...] = ()  # the input leaves it reads: ("x",)
    dims: tuple[str, ...] = ()  # the sizes it reads: ("x.shape[1]", "x.shape[2]")


@dataclass(frozen=True)
class DataCheck:
    """A condition the model itself checks on input values at run time (``torch._check(b <
    y.shape[0])`` with ``b = x.item()``; export's deferred runtime asserts), over the contract's
    symbols: a size symbol (``n``) or one that is an input's value (``Symbol.value_of``). The
    compiled package asserts it with torch's internal symbols (``Expected u0 < s17``); the
    guarded loader refuses a call that breaks it first, in these words. Since schema 1.8."""

    text: str  # torch's own: "u0 < s17"
    expr: str  # over the contract's symbols: "u0 < n"
    words: str  # "x's value must be < y.shape[0]"
    arguments: tuple[str, ...] = ()  # the input leaves it reads: ("x", "y")


@dataclass(frozen=True)
class IOContract:
    params: tuple[ParamSpec, ...]
    inputs: tuple[InputSpec, ...]
    outputs: tuple[OutputSpec, ...]
    symbols: tuple[Symbol, ...]
    in_spec: str = ""  # torch pytree spec (treespec_dumps) of (args, kwargs)
    out_spec: str = ""
    # export's shape guards the guarded loader and ``probe --inputs`` enforce (``input.guard``);
    # None: the build recorded none. Since schema 1.4.
    guards: tuple[ShapeGuard, ...] | None = None
    # the model's own checks on input values (data-dependent); None: none. Since schema 1.8.
    data_checks: tuple[DataCheck, ...] | None = None

    def tensor_inputs(self) -> list[InputSpec]:
        return sorted((i for i in self.inputs if i.kind == "tensor"), key=lambda i: i.index or 0)

    def tensor_input_name(self, index: int) -> str:
        """The name of AOTI's ``input_handles[index]`` (its checks count tensor inputs only)."""
        tensors = self.tensor_inputs()
        return tensors[index].name if 0 <= index < len(tensors) else f"input {index}"


@dataclass(frozen=True)
class KernelImage:
    entry: str  # archive entry (relative to root)
    kind: str  # "cubin" | "fatbin"
    archs: tuple[str, ...]  # "sm_90a"; for fatbins "sass:sm_90a", "ptx:sm_90"


@dataclass(frozen=True)
class Target:
    device_type: str  # "cpu" | "cuda"
    platform: str  # "linux"
    machine: str  # "x86_64"
    device_name: str | None = None  # "NVIDIA H100 80GB HBM3"
    compute_capability: str | None = None  # "90"
    kernel_archs: tuple[str, ...] = ()  # distinct SASS archs over all kernel images
    kernels: tuple[KernelImage, ...] = ()
    cpu_isa: tuple[str, ...] = ()  # /proc/cpuinfo flag names the native code was compiled to use
    aoti_cpu_isa: str | None = None  # AOTI_CPU_ISA ("AVX2", "AVX512")
    march: str | None = None  # "-march=" value of the compile command ("native")
    build_cpu: str | None = None  # model name of the build CPU
    # the compute capabilities ``aoti-guard build --cuda-arch`` was asked to cover ("80", "90"), each
    # checked against the kernel images at build time; None when none were listed. Since schema 1.2.
    cuda_archs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Toolchain:
    torch: str
    python: str
    torch_git: str | None = None
    triton: str | None = None
    cuda_runtime: str | None = None  # torch.version.cuda of the build
    driver: str | None = None  # build host's GPU driver
    cxx: str | None = None  # compiler command
    cxx_version: str | None = None
    glibcxx_required: str | None = None  # highest GLIBCXX_* the .so needs
    cxxabi_required: str | None = None
    glibc_required: str | None = None
    libstdcxx_build: str | None = None  # libstdc++ the build process had loaded (file name + max GLIBCXX)


@dataclass(frozen=True)
class ConstantSpec:
    fqn: str
    kind: str  # "parameter" | "buffer" | "constant"
    dtype: str
    shape: tuple[int, ...]
    sha256: str
    nbytes: int
    storage: str  # "package": a runtime constant (load_constants can replace it); "inlined": baked into code
    internal_name: str | None = None  # AOTI's name ("lin_weight")
    # since 1.6: the name the loaded model lists (get_constant_fqns) when the compiler renamed it:
    # a plain tensor attribute ``offset`` is ``_tensor_constant0`` in the package (paired by value)
    runtime_fqn: str | None = None
    # since 1.7: whether the model's state_dict() holds it (False: a non-persistent buffer such as
    # a rotary inv_freq, or a lifted tensor constant: no checkpoint file has it, the package's
    # value stays); None: not recorded (an older build), every package constant is asked for
    in_state_dict: bool | None = None
    # since 1.7: the other FQNs of the same tensor (tied weights: lm_head.weight and
    # embed_tokens.weight); the package keeps one of them, and a checkpoint that holds any one of
    # the names gives it (save_pretrained drops the tied copy)
    tied_with: tuple[str, ...] = ()

    @property
    def loaded_name(self) -> str:
        """The name the loaded model knows it by: what ``get_constant_fqns`` lists and
        ``load_constants`` takes."""
        return self.runtime_fqn or self.fqn


@dataclass(frozen=True)
class CheckTolerance:
    """What the build held compiled to against eager for one dtype: ``--atol``/``--rtol`` where
    given, else the dtype's default; ``origin`` says which (``"--atol/--rtol"``, ``"float32
    default"``, ``"--atol; rtol: float32 default"``, ``"exact: no default for int64"``). Decided
    in one function, aoti_guard/builder/validate/tolerance.py's ``resolve``. Since schema 1.7."""

    atol: float
    rtol: float
    origin: str


@dataclass(frozen=True)
class Tolerance:
    """Per-output tolerance for ``|out - ref| <= atol + rtol * |ref|`` (rule in docs/manifest.md)."""

    output: str
    atol: float
    rtol: float
    measured_abs: float = 0.0
    measured_rel: float = 0.0
    # Since 1.7 (a 1.6 reader ignores both). ``origin``: how atol/rtol were decided ("float32
    # floor", "4 x the measured excess 2.1e-06 on sample max"); ``build_check``: the tolerance the
    # build compared compiled with eager by, recorded here once rather than on every table row.
    origin: str | None = None
    build_check: CheckTolerance | None = None


@dataclass(frozen=True)
class GoldenSample:
    id: str  # "example", "min", "max", "mid"
    inputs: dict[str, str]  # input name -> tensor key in the golden file
    outputs: dict[str, str]  # output name -> tensor key
    symbols: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class InputRecipe:
    """A generated golden input, made again bit-exactly on the target by
    runtime_probe/golden/recipe.py (the generator the build used). Since schema 1.5."""

    input: str  # the contract's input name
    kind: str  # "pool" | "mask" | "ids" | "positions" (recipe.KINDS)
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    seed: int
    sha256: str  # of the generated values' row-major little-endian bytes
    pool: str | None = None  # "pool": key of a 1-D tensor in the golden file whose values it draws
    low: int | None = None  # "ids": the inclusive range drawn from (both ends always present)
    high: int | None = None
    keep: int | None = None  # "mask": the value of a position attended to, and of a padded one
    pad: int | None = None
    follows: str | None = None  # "positions": the mask input whose padding the positions follow


@dataclass(frozen=True)
class OutputDigest:
    """A reference output too large to store: a fixed subset of its elements (stored in the golden
    file) and its statistics, with tolerances derived from the elementwise rule so that an output
    that passes elementwise always passes them (runtime_probe/golden/compact.py). Since 1.5."""

    output: str
    dtype: str
    shape: tuple[int, ...]
    indices: str  # key of the int64 row-major positions in the golden file
    values: str  # key of the reference's values at them
    nonfinite: int  # NaN/Inf count: must match exactly
    # over the finite elements (None: no finite element, or the sum is beyond float64)
    sum: float | None = None
    abs_sum: float | None = None
    min: float | None = None
    max: float | None = None
    sum_tol: float = 0.0  # |sum_t - sum_r| and |abs_sum_t - abs_sum_r| at most this
    minmax_tol: float = 0.0  # |min_t - min_r| and |max_t - max_r| at most this


@dataclass(frozen=True)
class CompactSample:
    """A golden sample over the size cap, kept in compact form. Since schema 1.5."""

    id: str
    symbols: dict[str, int]
    origin: str  # "example" | "generated" | "user"
    inputs: dict[str, str]  # captured inputs, stored whole: input name -> key in the golden file
    recipes: tuple[InputRecipe, ...]  # generated inputs
    outputs: tuple[OutputDigest, ...]


@dataclass(frozen=True)
class References:
    """Golden references made for weights other than the build's, on the build side, against the
    same compiled package (``aoti-guard references``). Since schema 1.8.

    The package's constants' digests (``ConstantSpec.sha256``) are then those weights', while its
    .so still holds the build's: the references apply only when the weights are given at load
    (``probe --weights``, ``load(..., weights=)``)."""

    weights: str  # the weights file's name (no folder): what to give at load
    model: str  # the factory that computed them ("make (model.py)")
    created: str  # when (UTC, ISO 8601)
    tool: str  # "aoti-guard 0.9.0"
    base_manifest_sha256: str  # the manifest of the package they were made from (its compiled code and build)
    base_created: str  # when that package was built
    # the tolerances stay the build's, measured on its weights: said here so a reader of the
    # manifest alone knows
    tolerances: str = "the build's, measured with the build's weights"


@dataclass(frozen=True)
class Golden:
    entry: str
    samples: tuple[GoldenSample, ...]
    tolerances: tuple[Tolerance, ...]
    nbytes: int
    cap_bytes: int
    rule: str = ""
    dropped: tuple[str, ...] = ()
    # samples over the cap, in compact form (since 1.5; a 1.4 reader ignores them); None: none
    compact_samples: tuple[CompactSample, ...] | None = None
    # since 1.8: the references were made for weights given at load (References); None: the build's own
    references: References | None = None


@dataclass(frozen=True)
class NonfiniteBaseline:
    """What the twin's printer showed on the golden samples: ``names`` maps a graph input or
    buffer to the non-finite kinds it held ("nan", "-inf", "+inf"; runtime_probe/ladder/printer.py);
    a name that stayed finite is absent. ``version``: bump when a name or a kind changes meaning."""

    version: int
    samples: tuple[str, ...]
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class TwinInfo:
    model_name: str
    entry_prefix: str  # where its files sit in the archive (outside torch's scan path)
    nan_asserts: bool
    intermediate_value_printer: str  # AOTI printer level compiled in ("3": kernel names, "2": values too)
    inductor_configs: dict[str, str] = field(default_factory=dict)
    kernels: tuple[str, ...] = ()  # kernel names the twin printed on the example sample at build time
    # "own": the weights are in the twin's .so; "release": it has none and is given the release
    # model's constants at load (runtime_probe.package.release_constants)
    weights: str = "own"
    # The baseline the escalation reads the level-2 printer against: which graph inputs and buffers
    # (the twin's names: arg7_1, buf10) held NaN/-inf/+inf on the golden samples at build time.
    # None: no baseline (a level-3 twin, or none recorded). Since 1.5.
    nonfinite: NonfiniteBaseline | None = None


@dataclass(frozen=True)
class UserCode:
    """User GPU code the program holds, read off the exported graph (since 1.8): custom ops
    (``mylib::scale``: a ``torch.library.custom_op`` or ``triton_op``) and user Triton kernels
    (the kernel wrapper's nodes). ``memcheck``: what the build's memcheck of it did ("passed",
    "off": --no-memcheck, "not run: WHY"). A probe runs memcheck on a package that records any."""

    custom_ops: tuple[str, ...] = ()
    triton_kernels: tuple[str, ...] = ()
    memcheck: str = "not run"

    @property
    def any(self) -> bool:
        return bool(self.custom_ops or self.triton_kernels)

    def describe(self) -> str:
        parts = [f"custom op(s) {', '.join(self.custom_ops)}"] if self.custom_ops else []
        if self.triton_kernels:
            parts.append(f"Triton kernel(s) {', '.join(self.triton_kernels)}")
        return "; ".join(parts) or "no user GPU code"


@dataclass(frozen=True)
class Manifest:
    schema_version: str
    tool: dict[str, str]
    created: str
    root: str
    model_name: str
    io: IOContract
    target: Target
    toolchain: Toolchain
    constants: tuple[ConstantSpec, ...]
    hashes: dict[str, str]
    golden: Golden | None = None
    debug_twin: TwinInfo | None = None
    inductor_configs: dict[str, str] = field(default_factory=dict)
    validation: dict[str, Any] = field(default_factory=dict)
    aoti_metadata: dict[str, str] = field(default_factory=dict)
    # A twin without weights of its own (weights "release") is recorded here, never under
    # debug_twin: a 1.2 reader ignores this key and sees no twin, where under debug_twin it would
    # load the twin without its constants and crash on the first call.
    debug_twin_without_weights: TwinInfo | None = None
    # since 1.7, a package without weights (package_constants_in_so=False) only: the entry
    # (layout.KEPT_CONSTANTS, safetensors) holding the values of its constants that no
    # state_dict() holds (ConstantSpec.in_state_dict False), loaded before the caller's weights
    kept_constants: str | None = None
    user_code: UserCode | None = None  # since 1.8: user Triton kernels and custom ops in the program

    @property
    def twin(self) -> TwinInfo | None:
        """The debug twin, whichever key records it (``weights`` says whether it needs the
        release model's constants)."""
        return self.debug_twin_without_weights or self.debug_twin

    def output_names(self) -> list[str]:
        return [o.name for o in self.io.outputs]

    def package_constants(self) -> list[ConstantSpec]:
        return [c for c in self.constants if c.storage == "package"]

    def tolerance_for(self, output: str) -> Tolerance | None:
        if self.golden is None:
            return None
        return next((t for t in self.golden.tolerances if t.output == output), None)

    def reference_tolerance(self, output: str) -> Tolerance:
        """The tolerance ``output`` is held to against its golden reference (``reference_tolerance``)."""
        return reference_tolerance(self.golden.tolerances if self.golden is not None else (), output)


def reference_tolerance(tolerances: Iterable[Tolerance], output: str) -> Tolerance:
    """``output``'s stored tolerance, else exact: a build stores one for every output it compared
    (integers' as 0/0), so an output without one has nothing that would allow a difference."""
    found = next((t for t in tolerances if t.output == output), None)
    return found if found is not None else Tolerance(output, 0.0, 0.0, origin="exact: none stored")


def _reject_constant(name: str) -> Any:
    # JSON has no NaN/Infinity; Python's json accepts them unless told otherwise.
    raise ValueError(f"non-standard JSON constant {name}")


def parse_manifest(raw: bytes) -> Manifest:
    """Parse and validate manifest bytes. Raises ManifestError (never another exception type)."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError("manifest.invalid", f"manifest is {len(raw)} bytes, over the {MAX_MANIFEST_BYTES} limit")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ManifestError("manifest.invalid", f"manifest is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ManifestError("manifest.invalid", f"manifest is a JSON {type(data).__name__}, not an object")
    version = data.get("schema_version")
    try:
        major, _ = schema_version(version, "the manifest's schema_version", MANIFEST_SCHEMA_VERSION)
    except NumberError as exc:
        raise ManifestError("manifest.invalid", str(exc)) from None
    if major > _OUR_MAJOR:
        raise ManifestError(
            "manifest.unsupported_version",
            f"manifest schema {version} is newer than this reader supports ({MANIFEST_SCHEMA_VERSION})",
            found=str(version),
        )
    try:
        return from_jsonable(Manifest, data, "manifest")
    except SerdeError as exc:
        raise ManifestError("manifest.invalid", f"manifest field {exc}") from None
    except RecursionError:
        raise ManifestError("manifest.invalid", "manifest is nested too deeply") from None


def dump_manifest(manifest: Manifest) -> bytes:
    return (json.dumps(to_jsonable(manifest), indent=1, allow_nan=False) + "\n").encode()


def manifest_to_dict(manifest: Manifest) -> dict[str, Any]:
    out: dict[str, Any] = to_jsonable(manifest)
    return out
