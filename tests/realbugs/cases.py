"""The corpus: failures users reported in public, each re-expressed as a small model (models.py) and
a serving mistake, with what aoti-guard must do about it. Declarative only: runner.py runs them,
test_realbugs.py asserts them, report.py tabulates them (docs/realbugs.md).

A case's ``expect`` is aoti-guard's duty, one of:

- ``build``: ``aoti-guard build`` fails (exit 1) with one of ``codes`` among its error findings;
- ``warn``: the build passes and says why with one of ``codes`` (a warning);
- ``probe``: ``python -m runtime_probe PKG`` reports one of ``codes`` (``codes`` empty: it passes);
- ``serve``: the build passes and ``runtime_probe.load(PKG)`` refuses the call (or the weights)
  with one of ``codes``, its message naming each of ``names``;
- ``runs``: the build passes and the guarded call returns what eager returns (fixed upstream, or
  the mistake is harmless);
- ``cannot``: aoti-guard lacks the information; ``why`` says which (never reported as passed).

``bare`` is what plain AOTI must be seen doing for the case to be described right (asserted);
``None``: measured for the table only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CASES", "CLASSES", "PACKAGES", "Case", "Expect", "Package", "Serve"]

CLASSES = (
    "layout",
    "shape range",
    "guard specialisation",
    "python constant",
    "custom op",
    "data-dependent",
    "half precision",
    "weights",
    "state",
    "package size",
    "threads",
    "device",
    "toolchain/ISA",
    "export failure",
)
# classes being fixed by others right now (issue 42): their cases are strict xfails until then
IN_PROGRESS = ("data-dependent", "half precision", "package size", "threads")

M = "tests/realbugs/models.py"
NO_TWIN = ("--no-debug-twin",)


@dataclass(frozen=True)
class Package:
    """How a case's package is made: an ``aoti-guard build`` of ``target`` with ``flags``, or a
    ready ``file`` in the repository. Cases naming the same package share one build."""

    target: str | None
    flags: tuple[str, ...] = NO_TWIN
    file: str | None = None


PACKAGES: dict[str, Package] = {
    # the same name and flags as tests/integration/conftest.py: one build serves both suites
    "static": Package("tests/integration/models.py:static"),
    "noweights": Package("tests/integration/models.py:static", (*NO_TWIN, "--inductor-config", "aot_inductor.package_constants_in_so=false")),
    "static_v4": Package("tests/integration/models.py:static", (*NO_TWIN, "--cpu-isa", "x86-64-v4")),
    "python_flag": Package(f"{M}:python_flag"),
    "reshape_100": Package(f"{M}:reshape_100"),
    "conv36": Package(f"{M}:conv36"),
    "lowering_pass": Package(f"{M}:lowering_pass"),
    "prefix": Package(f"{M}:data_dependent_check"),
    "fp16_overflow": Package(f"{M}:fp16_overflow", (*NO_TWIN, "--allow-nonfinite")),
    "bf16_rope": Package(f"{M}:bf16_rope"),
    "bf16_threshold": Package(f"{M}:bf16_threshold"),
    "shared_storage": Package(f"{M}:shared_storage"),
    "counter": Package(f"{M}:counter"),
    "encoder": Package(f"{M}:encoder"),
    "full_of_size": Package(f"{M}:full_of_size"),
    "derived_twice": Package(f"{M}:derived_twice"),
    "example_at_min": Package(f"{M}:example_at_min"),
    "pinned_batch": Package(f"{M}:pinned_batch"),
    "scalar_output": Package(f"{M}:scalar_output"),
    "custom_op": Package("tests/realbugs/custom_op_model.py:custom_op"),
    "cuda_example": Package(None, file="tests/data/cuda_example.pt2"),
}


@dataclass(frozen=True)
class Serve:
    """What the serving process does: ``inputs`` (a ``models.py`` function: one call's args and
    kwargs), ``weights`` (a ``{name: tensor}`` map given to load_constants first), ``calls`` in a
    row (a model with state); ``eager=False``: the serving process has no eager model to compare
    with (it must not import the model's module); ``device``: the load's device (GPU cases)."""

    inputs: str
    weights: str | None = None
    calls: int = 1
    eager: bool = True
    device: str | None = None
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Expect:
    stage: str  # build | warn | probe | serve | runs | cannot
    codes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    why: str = ""  # for cannot: the information aoti-guard does not have
    probe_args: tuple[str, ...] = ()  # extra probe flags (threads)
    message: tuple[str, ...] = ()  # words a finding's text or hint must hold (the remedy)


@dataclass(frozen=True)
class Case:
    name: str
    report: str  # owner/repo#number
    title: str  # the report, in our words
    klass: str
    package: str  # a key of PACKAGES
    serve: Serve
    expect: Expect
    bare: str | None = None  # ok | wrong | error | crash | export failed: asserted where it is the point
    gpu: bool = False
    gap: str = ""  # a new gap nobody owns: a strict xfail until it is fixed (listed in the report)

    @property
    def in_progress(self) -> bool:
        return self.klass in IN_PROGRESS

    @property
    def url(self) -> str:
        repo, number = self.report.split("#")
        return f"https://github.com/{repo}/issues/{number}"


P = "pytorch/pytorch#"


def _serve(inputs: str, **kw: object) -> Serve:
    return Serve(f"{M}:{inputs}", **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    Case("transposed_input", P + "122784", "a transposed input into a package compiled for contiguous memory", "layout", "static",
         _serve("serve_transposed"), Expect("serve", ("input.layout", "input.stride"), ("x",)), bare="wrong"),
    Case("permuted_into_encoder", P + "196251", "conv1d -> permute output (channels-first memory) into an attention layer", "layout",
         "encoder", _serve("serve_permuted"), Expect("serve", ("input.layout", "input.stride"), ("src",))),
    Case("python_flag", P + "135796", "a Python bool argument differs from the value the model was exported with", "python constant",
         "python_flag", _serve("serve_flag_false"), Expect("serve", ("input.value",), ("double",)), bare="wrong"),
    Case("scalar_output", P + "139797", "a model that returns a Python int beside its tensor", "python constant", "scalar_output",
         _serve("serve_rows_4x4"), Expect("runs")),
    Case("batch_past_static", P + "151582", "a package exported at one batch size served a larger batch", "shape range", "static",
         _serve("serve_batch16"), Expect("serve", ("input.shape",), ("x",)), bare="wrong"),
    Case("channel_slice", P + "153992", "a 9-channel slice into a package compiled for 36 channels", "shape range", "conv36",
         _serve("serve_nine_channels"), Expect("serve", ("input.shape",), ("x",))),
    Case("derived_size", P + "137748", "an input whose size must be twice another's served an odd size", "shape range", "derived_twice",
         _serve("serve_y_odd"), Expect("serve", ("input.shape", "input.guard"), ("y",))),
    Case("example_at_min", "pytorch/pytorch#176349", "an example input at the low end of its declared dynamic range", "export failure",
         "example_at_min", _serve("serve_batch_9"), Expect("runs")),
    Case("reshape_100", P + "151925", "reshape(100, -1) holds only for some sizes; AOTI runs the others", "guard specialisation",
         "reshape_100", _serve("serve_rows_30"), Expect("build", ("build.export_specialized",))),
    Case("lowering_pass", P + "150364", "a lowering pass specialises a dynamic size to the example's", "guard specialisation",
         "lowering_pass", _serve("serve_rows_4"), Expect("build", ("build.validation_failed", "build.first_divergence")), bare="wrong"),
    Case("pinned_batch", P + "121038", "a dim declared dynamic that the code pins to a constant", "guard specialisation",
         "pinned_batch", _serve("serve_batch_32"), Expect("build", ("build.export_failed",), message=("batch",)), bare="export failed"),
    Case("pinned_batch_neighbors", P + "134137", "dynamic export refused: the dim was inferred to be a constant", "guard specialisation",
         "pinned_batch", _serve("serve_batch_32"), Expect("build", ("build.export_failed",), message=("batch",)), bare="export failed"),
    Case("full_of_size", P + "143667", "torch.full sized by an input dim: Inductor could specialise on it", "guard specialisation",
         "full_of_size", _serve("serve_rows_13"), Expect("runs")),
    Case("custom_op_no_python", P + "145394", "a Python custom op the package needs at run time, absent in the serving process",
         "custom op", "custom_op", Serve("tests/realbugs/custom_op_model.py:serve", eager=False), Expect("serve", ("load.error", "run.error"), ("realbugs::scaled_tanh",))),
    Case("custom_op_message", P + "134581", "a missing Python custom op reported only as a missing schema", "custom op", "custom_op",
         Serve("tests/realbugs/custom_op_model.py:serve", eager=False), Expect("warn", ("build.custom_op",), message=("realbugs::scaled_tanh",)),
         gap="the build does not name a Python custom op the package needs at run time (no finding exists for it)"),
    Case("data_dependent_check", P + "150539", "a torch._check on an .item() value: a valid model that must build and refuse b >= y.shape[0]",
         "data-dependent", "prefix", _serve("serve_b_past_y"), Expect("serve", names=("b", "y.shape[0]"))),
    Case("fp16_overflow", P + "183607", "float16 x*x overflows to inf in eager, not in the fused kernel", "half precision",
         "fp16_overflow", _serve("serve_near_300"), Expect("build", message=("emulate_precision_casts",)), bare="wrong"),
    Case("bf16_rope", P + "159239", "bfloat16 rotary embedding: Inductor elides the per-op rounding", "half precision", "bf16_rope",
         _serve("serve_rope"), Expect("build", message=("emulate_precision_casts",))),
    Case("bf16_rope_cpu", P + "182225", "bfloat16 rotate_half RoPE differs from eager on CPU", "half precision", "bf16_rope",
         _serve("serve_rope"), Expect("build", message=("emulate_precision_casts",))),
    Case("bf16_threshold", P + "128306", "a bfloat16 score compared with 0.2 differs at the threshold", "half precision",
         "bf16_threshold", _serve("serve_near_threshold"), Expect("build", message=("emulate_precision_casts",))),
    Case("shared_storage", P + "186176", "constants serialised with their whole shared storage (views of one tensor)", "package size",
         "shared_storage", _serve("serve_views"), Expect("warn", message=("a", "storage"))),
    Case("weightless_package", P + "142246", "a package built without its weights, called before load_constants", "weights",
         "noweights", _serve("serve_x_static"), Expect("serve", ("constants.missing",), ("lin.weight",)), bare="crash"),
    Case("weightless_then_loaded", P + "142246", "the same package, its weights given first (the intended use)", "weights",
         "noweights", _serve("serve_x_static", weights=f"{M}:weights_full"), Expect("runs")),
    Case("weights_transposed", P + "180446", "load_constants with a transposed view of a weight", "weights", "static",
         _serve("serve_x_static", weights=f"{M}:weights_transposed"), Expect("serve", ("constants.layout",), ("lin.weight",)), bare="wrong"),
    Case("weights_bf16", P + "179225", "load_constants with a bfloat16 weight for a float32 constant", "weights", "static",
         _serve("serve_x_static", weights=f"{M}:weights_bf16"), Expect("serve", ("constants.dtype_mismatch",), ("lin.weight",)), bare="wrong"),
    Case("weights_one_larger", P + "179225", "load_constants with a weight one row larger than compiled", "weights", "static",
         _serve("serve_x_static", weights=f"{M}:weights_one_larger"), Expect("serve", ("constants.shape_mismatch",), ("lin.weight",))),
    Case("buffer_counter", P + "165444", "a buffer updated in place on every call (a counter) in an AOTI package", "state", "counter",
         _serve("serve_ones", calls=3), Expect("warn", ("build.stateful_model",))),
    Case("buffer_mul", P + "120424", "a buffer multiplied in place in forward: the mutation must persist", "state", "counter",
         _serve("serve_ones", calls=3), Expect("warn", ("build.stateful_model",))),
    Case("small_buffer_inlined", P + "169118", "a one-element buffer inlined as a constant, then mutated", "state", "counter",
         _serve("serve_ones", calls=3), Expect("warn", ("build.stateful_model",))),
    Case("threads_one_runner", P + "134946", "many threads calling one AOTI runner: throughput does not scale", "threads", "static",
         _serve("serve_x_static"), Expect("probe", names=("thread",), probe_args=("--threads", "2"))),
    Case("threads_one_instance", P + "148937", "the package loader made one model instance: other threads block", "threads",
         "static", _serve("serve_x_static"), Expect("probe", names=("runner",), probe_args=("--threads", "2"))),
    Case("threads_144459", P + "144459", "AOTI throughput across threads (issue 42's list)", "threads", "static",
         _serve("serve_x_static"), Expect("probe", names=("thread",), probe_args=("--threads", "2"))),
    Case("threads_shared_memory", P + "154094", "one package shared by instances on several cores: throughput drops", "threads",
         "static", _serve("serve_x_static"), Expect("probe", names=("thread",), probe_args=("--threads", "2"))),
    Case("isa_safe_direction", P + "191713", "the ISA warning fires for an AVX2 package on an AVX-512 host (the safe way)",
         "toolchain/ISA", "static", _serve("serve_x_static"), Expect("probe")),
    Case("isa_beyond_fleet", P + "121516", "a package built with AVX-512 dies with SIGILL on an AVX2 host", "toolchain/ISA",
         "static_v4", _serve("serve_x_static"), Expect("warn", ("build.isa_beyond_baseline",))),
    Case("cuda_package_no_gpu", P + "145730", "a CUDA package loaded in a process without CUDA", "device", "cuda_example",
         _serve("serve_cuda_example", eager=False), Expect("probe", ("env.device_unavailable", "env.gpu_runtime_missing", "env.device_mismatch"))),
    Case("cuda_index_1", P + "136369", "a package loaded on cuda:1 of a multi-GPU host", "device", "cuda_example",
         _serve("serve_cuda_example", eager=False, device="cuda:1"), Expect("runs"), gpu=True),
    Case("loader_cuda0_only", P + "152087", "the C++ package loader places every model on cuda:0", "device", "cuda_example",
         _serve("serve_cuda_example", eager=False, device="cuda:1"), Expect("runs"), gpu=True),
    Case("cross_device_copy", P + "152130", "x.to('cuda:1') inside the model: the output stays on cuda:0", "device", "cuda_example",
         _serve("serve_cuda_example", eager=False), Expect("cannot", why="the contract records one device per package; a second GPU inside the graph is not modelled"), gpu=True),
)


def by_name(name: str) -> Case:
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(name)


def distinct_reports() -> set[str]:
    return {c.report for c in CASES}


_ = field  # dataclasses.field kept for cases that grow list fields
