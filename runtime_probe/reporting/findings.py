"""Findings: what a check found, as data. Every code the tool can emit is registered here.

Codes are a public contract (scripts match on them): add new ones, never rename or reuse one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CODES", "EXIT_CODES", "Finding", "Severity", "exit_code_of", "has_errors", "worst"]


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


# code -> one line saying what it means. docs/findings.md is generated from this table.
CODES: dict[str, str] = {
    # archive: before any native code is opened
    "archive.unreadable": "The file is not a readable zip archive (truncated, not a zip, unreadable).",
    "archive.unsafe_entry": "An entry escapes the archive root (.., absolute path, symlink, other root) or is a duplicate.",
    "archive.too_large": "An entry or the whole archive is larger than allowed (zip bomb guard).",
    "archive.hash_mismatch": "An entry's SHA-256 differs from the manifest, or an entry is missing or unlisted.",
    "archive.signature_missing": "A public key was given but the package carries no signature.",
    "archive.signature_invalid": "The manifest signature does not verify with the given public key.",
    "archive.signature_unchecked": "The package is signed but no public key was given, so the signature was not checked.",
    "archive.ambiguous": "The zip's byte layout is ambiguous (prepended or trailing bytes, overlapping entries, headers that disagree).",
    "archive.no_model": "The archive holds no AOTInductor model under data/aotinductor/.",
    # package: what the package's own generated code needs from its files, read before native code
    "package.kernel_file_missing": "A GPU kernel file the model's generated code loads (loadKernel) is not in the model's folder of the package (a kernel file removed or renamed after the build, its kernel paths rewritten, or left out when it was packaged). It loads, and its first call fails with 'CUDA driver error: file not found', naming no file (pytorch#120194); the kernels and the file names they look for are named.",
    # manifest
    "manifest.missing": "No aoti-guard manifest: a plain AOTI package; only generic checks can run.",
    "manifest.invalid": "The manifest is not valid JSON of the expected shape.",
    "manifest.unsupported_version": "The manifest's schema major version is newer than this reader.",
    # env: the host
    "env.device_unavailable": "The device type the package needs is not present on this host.",
    "env.device_index_invalid": "The requested device index does not exist on this host.",
    "env.memcheck_unavailable": "A package with user GPU code (or --memcheck) was to be run under compute-sanitizer memcheck, but the tool is not installed on this host, or its child failed without an error of its own: the memory accesses were not checked (a warning, not a verdict).",
    "env.device_mismatch": "The requested device type differs from the one the package was compiled for.",
    "env.arch_mismatch": "The GPU's compute capability does not match the archs of the package's kernels (a warning when the build's --cuda-arch list names it and PTX covers it).",
    "env.driver_too_old": "The GPU driver is older than the CUDA runtime needs.",
    "env.torch_mismatch": "The host's torch differs from the build's only in patch or local tag, or its triton differs (info).",
    "env.torch_skew_seen": "The build's and the host's torch are different minor releases, a pair seen to load and pass (runtime_probe/host/skew.py names the run).",
    "env.torch_skew_unseen": "The build's and the host's torch are different minor releases, a pair never run (docs/compat.md): only this probe vouches for it.",
    "env.torch_skew_fails": "The build's and the host's torch are a pair of releases known to fail (runtime_probe/host/skew.py names the run and what failed).",
    "env.torch_missing": "torch cannot be imported on this host.",
    "env.torch_broken": "A fresh child interpreter died, exited or hung while importing torch and reading the host's facts: nothing of the package was opened yet.",
    "env.cpu_isa_missing": "The CPU lacks instruction-set features the package's native code was compiled for.",
    "env.libstdcxx_too_old": "The C++ runtime (libstdc++) or C library lacks symbol versions the .so needs.",
    "env.memory_insufficient": "Free device memory is below what the package's constants need.",
    "env.platform_mismatch": "The package was built for another OS or machine architecture.",
    "env.tmpdir_unusable": "The temporary folder (TMPDIR) is full, read-only or not writable: the probe could not keep its private copy of the package.",
    "env.terminated": "The probe or build was stopped by SIGTERM or SIGHUP (named in found); its children were killed and its temporary files removed.",
    "env.cxx_runtime_mismatch": "The package's C++ runtime and the process's libstdc++ do not mix (native frames in std::regex/locale).",
    # env: a serving image probed through a container engine (aoti-guard probe --image)
    "env.engine_unreachable": "No container engine answers (DOCKER_HOST, socket, permission): nothing was checked.",
    "env.image_missing": "The image is not on the engine (it is never pulled): nothing was checked.",
    "env.image_no_python": "The image has no Python interpreter to run the probe with.",
    "env.image_python_unsupported": "The image's Python is older than runtime_probe needs (3.11).",
    "env.image_no_torch": "The image's Python has no torch: it cannot load AOTInductor packages.",
    "env.image_no_probe": "The image has no runtime_probe and injecting this one was not allowed.",
    "env.image_probe_injected": "The image has no runtime_probe of its own; this tool's copy was mounted into the container.",
    "env.gpu_runtime_missing": "The package needs GPUs but the container engine cannot give a container any (no GPU runtime).",
    "env.container_timeout": "The probe container did not finish within its timeout; it was killed and removed.",
    "env.container_failed": "The probe container could not be run, or ended without a readable report.",
    # load: dlopen + model creation in a child
    "load.crash": "The child process died (signal) while loading the package.",
    "load.error": "Loading the package raised an error.",
    "load.import_failed": "A module given to register the package's custom ops (probe --import, the build's TARGET) raised on import in the child; the error is quoted. No escalation: the cause is the module, not the package.",
    "load.missing_op": "The package calls a custom op (torch.library) that the loading process never registered: import the module that defines it first (probe --import).",
    "load.timeout": "Loading the package did not finish within the timeout.",
    "load.native_frames": "Native frames of a crash while loading, and what they point at.",
    # constants (weights)
    "constants.missing": "A constant the model needs is absent (from the package or the weights file).",
    "constants.unexpected": "A constant is present that the model does not have.",
    "constants.shape_mismatch": "A constant's shape differs from the contract.",
    "constants.dtype_mismatch": "A constant's dtype differs from the contract.",
    "constants.device_mismatch": "A constant is on another device than the model.",
    "constants.unreadable": "The weights file cannot be read (truncated, lying header, not safetensors).",
    "constants.layout": "A new weight is not a plain dense contiguous tensor that owns its storage (a view, a slice of a larger storage, a subclass, sparse, or with the negative/conjugate bit): torch's load_constants would copy the wrong bytes or write past the constant.",
    "constants.tied_mismatch": "New weights hold different values under two names of one tied tensor (lm_head.weight and embed_tokens.weight); the package computes both from one tensor.",
    "constants.from_package": "New weights from a checkpoint (a state_dict() or save_pretrained file) lack constants no checkpoint holds (non-persistent buffers such as a rotary inv_freq, lifted tensor constants), which keep the package's values, or the tied copy of a weight, which takes the tensor of its tied name; the finding lists both.",
    "constants.new_weights": "The weights given differ from the build's: the golden samples were run and checked for NaN/Inf only, not compared with references; a pass says nothing about these weights' numerics.",
    "constants.references_need_weights": "The package's golden references were made for weights given at load (aoti-guard references), and none were given: the .so's own weights (the build's) ran, checked for NaN/Inf only, not compared; give the weights the references name.",
    # inputs (guarded loader and probe)
    "input.count": "Too few or too many arguments, or an unknown or missing keyword argument.",
    "input.type": "An argument is not a tensor where a tensor is expected (or the reverse).",
    "input.dtype": "An argument's dtype differs from the contract.",
    "input.shape": "An argument's rank or static size differs from the contract.",
    "input.range": "A dynamic size is outside its range, or sizes that share a symbol differ.",
    "input.stride": "An argument's strides (layout) differ from what was compiled for.",
    "input.device": "An argument is on another device than the model.",
    "input.value_range": "An integer input that indexes a table holds a value outside it (e.g. a token id beyond the embedding's rows).",
    "input.value": "A non-tensor argument differs from the value the model was specialized for.",
    "input.structure": "The package's input structure names library types (a Hugging Face cache, a dataclass) this process cannot import, so inputs could not be checked by name.",
    "input.subclass": "An argument is a torch.Tensor subclass (FakeTensor, a wrapper subclass): the compiled code reads plain tensors only.",
    "input.layout": "An argument is not a dense (strided) tensor: sparse, mkldnn or nested.",
    "input.flags": "An argument carries the conjugate or negative bit (a lazy view the compiled code would ignore).",
    "input.storage": "An argument's memory does not hold its view: its storage was resized or shrunk under it, or it has none the compiled code can read (a zero tensor, a functorch vmap/grad/functionalize wrapper).",
    "input.unchecked": "A contract rule (a size or stride over a symbol) could not be evaluated for this call: the input is refused rather than passed unchecked.",
    "input.guard": "The sizes break a shape guard torch.export assumed (e.g. h*w == 64): the package holds only the branch traced for sizes that satisfy it.",
    "input.data_check": "The input values break a check the model makes on them itself (torch._check(b < y.shape[0]) with b = x.item()), named by argument: the compiled package would stop on it in torch's internal symbols.",
    "output.device": "The guarded loader's native call returned a tensor output on another device than the manifest records for it (an output left on the wrong device, pytorch#152130's class): OutputContractError names the output, the device recorded and the one found.",
    # run
    "run.crash": "The child process died (signal) while running the model.",
    "run.error": "Running the model raised an error.",
    "run.timeout": "Running the model did not finish within the timeout.",
    "run.nonfinite": "An output holds NaN or Inf.",
    "run.illegal_memory_access": "A kernel made an illegal memory access.",
    "run.out_of_bounds": "compute-sanitizer memcheck, run by the probe on a package whose manifest records user GPU code (user Triton kernels, custom ops) or with --memcheck, with the caching allocator off, saw a kernel read or write past its tensor on a golden sample: the kernel, the sample and its sizes are named. The outputs may still have matched: the same access under the caching allocator reads a neighbour's memory silently.",
    "run.device_assert": "A device-side assertion fired.",
    "run.native_frames": "Native frames of a crash while running, and what they point at.",
    # escalate
    "escalate.no_verdict": "The escalation ladder ran after a failure and none of its steps named a cause (the steps it tried are listed).",
    # golden
    "golden.mismatch": "An output differs from the recorded reference beyond its tolerance.",
    "golden.output_device": "A golden sample's output came back on another device than the manifest records for it (a CUDA model's CPU output returned on the GPU, or the reverse): the output and sample are named.",
    "golden.missing": "The package has no golden samples to check against.",
    "golden.invalid": "A golden sample's stored data does not fit the package's own contract or cannot be read (an input the guarded loader refuses, a missing reference, BOOL bytes other than 0/1, a golden entry that is no tensor file): the package is inconsistent; the sample was not run, and nothing is escalated.",
    "golden.recipe_invalid": "A compact golden sample's record (recipe or digest) lies outside the contract or the size caps; it was not run.",
    "golden.throughput_serialised": "probe --threads: N concurrent callers got barely more calls/s than one (SCALING_MIN, runtime_probe/probe/throughput.py), because the package was loaded with one runner (AOTInductor's default: each call waits for the one before it); the same callers were timed again on the package loaded with N runners (the remedy, verified when that gave more), or the message says why that could not be tried.",
    "golden.throughput_saturated": "probe --threads: N concurrent callers got barely more calls/s than one, and N runners did not help either: the runner is not the cause; the cores (intra-op threads per call vs the CPUs the probe may use) or the device were already busy (callers x intra-op threads over the cores, other processes, memory bandwidth) (info).",
    "golden.recipe_mismatch": "A compact golden sample's inputs did not regenerate bit-exactly on this host; the sample was not checked.",
    # build
    "build.out_of_bounds": "The program holds user GPU code (user Triton kernels, custom ops) or --memcheck was given, and compute-sanitizer memcheck, running each golden sample once in the validation child with the caching allocator off, saw a kernel read or write past its tensor: the kernel, the sample and its sizes are named. The package is rejected even when its outputs matched eager: eager runs the same kernel, so the two agree on what it read out of bounds.",
    "build.factory_failed": "The model factory raised or returned something unusable.",
    "build.training_mode": "The factory's model is in training mode and some of its modules behave differently there (Dropout, attention dropout, BatchNorm): the build stops at resolve, before exporting; the modules are named, and the fix is model.eval().",
    "build.export_failed": "torch.export could not export the model.",
    "build.export_specialized": "torch.export assumed a condition that pins or relates declared dynamic dims (a shape guard such as h*w == 64) and AOTInductor does not check it: the bare package computes the traced branch for every size. An error unless --allow-export-guards (then the guarded loader enforces it); always an error when the guard cannot be translated.",
    "build.positions_exceeded": "A sequence dimension (dim 1 of input_ids, attention_mask, ...) accepts more positions than the model's config.max_position_embeddings: a rotary-position model runs there without error but never saw those positions in training (a warning; both numbers named).",
    "build.compile_failed": "AOTInductor could not compile the model.",
    "build.eager_failed": "The eager model raised on a golden sample.",
    "build.validation_failed": "A compiled output differs from the eager reference beyond tolerance.",
    "build.nonfinite": "An output holds NaN or Inf on a golden sample (error, naming the first NaN's kernel from the debug twin); or, the outputs finite, the values inside the model that hold NaN/Inf by design such as a -inf attention mask, recorded as the twin's baseline (info; a warning for a twin with NaN asserts, which stop there).",
    "build.fp64_reference_skipped": "No float64 reference could be computed for this model.",
    "build.range_narrowed": "AOTInductor narrowed a dynamic dimension's range while compiling (its own input checks accept less than the export): the contract follows the compiled range.",
    "build.sample_dropped": "A generated golden sample was not kept (size cap, or eager rejected it).",
    "build.coverage_incomplete": "The golden samples miss a free symbol's minimum or maximum: an error unless --allow-partial-coverage.",
    "build.package_failed": "Writing the package failed.",
    "build.twin_failed": "The debug twin could not be compiled; the release package is still valid.",
    "build.twin_compiled_after": "The debug twin was compiled in the build's own process after the release model, not in a child beside it (the finding says why: a program the child could not save, load or compile, such as a saved ExportedProgram TARGET whose user ops no module the build imports registers); the twin is the same, the build took longer.",
    "build.nondeterministic": "The model's forward draws random numbers (Dropout in training mode, rand/randn/bernoulli...); the module is named. The build calls the model a second time on the example: other outputs make it an error (no golden output can be checked; the difference is in evidence.two_calls), identical ones a warning (the draw does not reach the outputs on that input, as the LayerDrop number transformers' Wav2Vec2 draws in eval mode). A Dropout with train=False is no draw.",
    "build.constants_unnamed": "The package lists a constant by a name the program lacks (the compiler renamed it: a tensor attribute offset is _tensor_constant0) and reading the compiled model's values to pair it failed: the manifest keeps the program's name, and a probe will report the package's as unexpected.",
    "build.stateful_model": "The model updates buffers in place (a counter, BatchNorm running statistics in training mode): each call depends on the calls before it; the buffer is named.",
    "build.first_divergence": "Compiled differs from eager: the stages between them (eager twice, the exported program, the decomposed program, torch.compile, the package) were rerun on the failing sample, and this names the first that departs, with each stage's error. When a compiler stage departs on a float16/bfloat16 program, the package is rebuilt with emulate_precision_casts and run on that sample: the cause (Inductor's elided precision casts) and the remedy are named only when that makes it agree with eager (evidence.remedy.verified).",
    "build.tolerance_wide": "A stored tolerance is far above its dtype's floor; the finding gives the sample, the error and the rule that accepted it.",
    "build.compiler_suspect": "AOTInductor's output differs while eager and ONNX Runtime agree: likely a compiler problem.",
    "build.reference_disagrees": "Eager and ONNX Runtime disagree on an output: model numerics or nondeterminism, not necessarily the compiler.",
    "build.references_agree": "Eager, AOTInductor and ONNX Runtime agree on every output compared.",
    "build.onnx_export_failed": "No ONNX Runtime reference: the model could not be exported to ONNX or loaded by ONNX Runtime.",
    "build.onnx_run_failed": "ONNX Runtime could not run a golden sample: that sample has no second reference.",
    "build.onnx_not_kept": "--keep-onnx named a file, but no ONNX model was written there (the message says why).",
    "build.minified": "The AOTI minifier reduced the failure to a smaller repro (paths and rerun commands in evidence).",
    "build.minifier_failed": "The AOTI minifier could not reproduce or reduce the failure.",
    "build.isa_beyond_baseline": "The CPU package's .so uses AVX-512/AMX instructions: it dies with SIGILL on CPUs without them (build with --cpu-isa x86-64-v3).",
    "build.arch_uncovered": "A CUDA arch listed with --cuda-arch is not covered by the package's kernel images (SASS, or forward-compatible PTX).",
    "build.sign_failed": "The package could not be signed; it was not written.",
    "build.no_packaged_weights": "The package was built without its weights (aot_inductor.package_constants_in_so=False): its constants must be given at load (probe --weights, runtime_probe.load(pkg, weights=...)); a bare AOTI load that calls it first reads unset memory (SIGSEGV).",
    "build.constant_storage_oversized": "Constants serialised with more bytes than they hold: AOTInductor writes a parameter's or lifted constant's whole storage (pytorch#186176), so one that is a view of a larger tensor (an RNN's parameters after flatten_parameters(), nn.Parameter(big[:, :n])) makes the package larger than its weights; the constants, their bytes and their storage's are named, with the fix (.clone() them before export).",
    "build.resource_exhausted": "A build step ran out of a resource of the machine (a file-size limit such as ulimit -f, disk space or quota, memory, or a process killed with SIGKILL): not a compiler or model problem; what ran out and how it showed (errno, signal, the line) are in the evidence.",
    # the run itself: written into the report when no check could run, so a pipeline always has one
    "tool.usage": "The command line was wrong (a flag, or a file that is missing or not what it must be): nothing was checked.",
    "tool.failed": "The tool could not run (an unwritable output, a missing dependency): nothing more was checked.",
    "tool.bug": "The tool failed unexpectedly (a bug in it); the traceback's last line is in the evidence.",
}


# The exit code an error finding of this code stands for, where it is not 1 (DESIGN.md: 2 usage
# error, 3 the tool could not run). A report exits with the highest code among its error findings.
EXIT_CODES: dict[str, int] = {
    "env.engine_unreachable": 3,
    "env.gpu_runtime_missing": 3,
    "env.container_failed": 3,
    "env.image_missing": 2,
    "env.tmpdir_unusable": 3,
    "env.terminated": 3,
    "build.resource_exhausted": 3,
    "tool.usage": 2,
    "tool.failed": 3,
    "tool.bug": 3,
}


@dataclass(frozen=True)
class Finding:
    """One result of a check. ``evidence`` holds machine-readable facts (kernel, signal, frames...)."""

    code: str
    severity: Severity
    phase: str
    message: str
    expected: str | None = None
    found: str | None = None
    hint: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            # A typo in a code would silently break every script matching on it.
            raise ValueError(f"unregistered finding code {self.code!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity.value,
            "phase": self.phase,
            "message": self.message,
            "expected": self.expected,
            "found": self.found,
            "hint": self.hint,
        }
        if self.evidence:
            out["evidence"] = dict(self.evidence)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            code=str(data["code"]),
            severity=Severity(data["severity"]),
            phase=str(data["phase"]),
            message=str(data["message"]),
            expected=_opt_str(data.get("expected")),
            found=_opt_str(data.get("found")),
            hint=_opt_str(data.get("hint")),
            evidence=dict(data.get("evidence") or {}),
        )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def error(code: str, phase: str, message: str, **kw: Any) -> Finding:
    return Finding(code, Severity.ERROR, phase, message, **kw)


def warning(code: str, phase: str, message: str, **kw: Any) -> Finding:
    return Finding(code, Severity.WARNING, phase, message, **kw)


def info(code: str, phase: str, message: str, **kw: Any) -> Finding:
    return Finding(code, Severity.INFO, phase, message, **kw)


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity is Severity.ERROR for f in findings)


def worst(findings: Iterable[Finding]) -> Severity | None:
    order = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}
    result: Severity | None = None
    for f in findings:
        if result is None or order[f.severity] > order[result]:
            result = f.severity
    return result


def exit_code_of(findings: Iterable[Finding]) -> int:
    """0 without error findings; else the highest exit code they stand for (1 unless EXIT_CODES says 2 or 3)."""
    codes = [EXIT_CODES.get(f.code, 1) for f in findings if f.severity is Severity.ERROR]
    return max(codes, default=0)
