"""The corpus: every case (cases.Case) and the packages they share (cases.Package).

Reports named in issue 42 first, then the ones found since; GPU cases last (``gpu=True``)."""

from __future__ import annotations

from .cases import NO_TWIN, Case, Expect, Package, Serve

__all__ = ["CASES", "PACKAGES", "by_name", "distinct_reports"]

M = "tests/realbugs/models.py"

PACKAGES: dict[str, Package] = {
    # the same name and flags as tests/integration/conftest.py: one build serves both suites
    "static": Package("tests/integration/models.py:static"),
    "noweights": Package(
        "tests/integration/models.py:static", (*NO_TWIN, "--inductor-config", "aot_inductor.package_constants_in_so=false")
    ),
    # built as a user on an AVX-512 host would: -march=native
    "static_native": Package("tests/integration/models.py:static", (*NO_TWIN, "--cpu-isa", "native")),
    "python_flag": Package(f"{M}:python_flag"),
    "reshape_100": Package(f"{M}:reshape_100"),
    "conv36": Package(f"{M}:conv36"),
    # the stage bisection finds Inductor departing first: the minifier would run 120 s by itself; 5 s here
    "lowering_pass": Package(f"{M}:lowering_pass", (*NO_TWIN, "--minify", "--minify-timeout", "5")),
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
    "matmul_chain": Package(f"{M}:matmul_chain"),
    "cuda_example": Package(None, file="tests/data/cuda_example.pt2"),
    # built on the GPU machine by the gpu cases (on a CPU host they are deselected: -m 'not gpu')
    "cuda_mlp": Package(f"{M}:cuda_mlp"),
    "cross_gpu": Package(f"{M}:cross_gpu"),
}


P = "pytorch/pytorch#"


def _serve(inputs: str, **kw: object) -> Serve:
    return Serve(f"{M}:{inputs}", **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    Case(
        "transposed_input",
        P + "122784",
        "a transposed input into a package compiled for contiguous memory",
        "layout",
        "python_flag",
        _serve("serve_transposed"),
        Expect("serve", ("input.layout", "input.stride"), ("x",)),
        bare="wrong",
    ),
    Case(
        "permuted_into_encoder",
        P + "196251",
        "conv1d -> permute output (channels-first memory) into an attention layer",
        "layout",
        "encoder",
        _serve("serve_permuted"),
        Expect("serve", ("input.layout", "input.stride"), ("src",)),
    ),
    Case(
        "python_flag",
        P + "135796",
        "a Python bool argument differs from the value the model was exported with",
        "python constant",
        "python_flag",
        _serve("serve_flag_false"),
        Expect("serve", ("input.value",), ("double",)),
        bare="wrong",
    ),
    Case(
        "scalar_output",
        P + "139797",
        "a model that returns a Python int beside its tensor",
        "python constant",
        "scalar_output",
        _serve("serve_rows_4x4"),
        Expect("runs"),
    ),
    Case(
        "batch_past_static",
        P + "151582",
        "a package exported at one batch size served a larger batch",
        "shape range",
        "static",
        _serve("serve_batch16"),
        Expect("serve", ("input.shape",), ("x",)),
        bare="wrong",
    ),
    Case(
        "channel_slice",
        P + "153992",
        "a 9-channel slice into a package compiled for 36 channels",
        "shape range",
        "conv36",
        _serve("serve_nine_channels"),
        Expect("serve", ("input.shape",), ("x",)),
    ),
    Case(
        "derived_size",
        P + "137748",
        "an input whose size must be twice another's served an odd size",
        "shape range",
        "derived_twice",
        _serve("serve_y_odd"),
        Expect("serve", ("input.shape", "input.guard", "input.range"), ("y",)),
    ),
    Case(
        "example_at_min",
        "pytorch/pytorch#176349",
        "an example input at the low end of its declared dynamic range",
        "export failure",
        "example_at_min",
        _serve("serve_batch_9"),
        Expect("runs"),
    ),
    Case(
        "reshape_100",
        P + "151925",
        "reshape(100, -1) holds only for some sizes; AOTI runs the others",
        "guard specialisation",
        "reshape_100",
        _serve("serve_rows_30"),
        Expect("build", ("build.export_specialized", "build.export_failed")),
    ),
    Case(
        "lowering_pass",
        P + "150364",
        "a lowering pass specialises a dynamic size to the example's",
        "guard specialisation",
        "lowering_pass",
        _serve("serve_rows_4"),
        Expect("build", ("build.validation_failed", "build.first_divergence")),
        bare="wrong",
    ),
    Case(
        "pinned_batch",
        P + "121038",
        "a dim declared dynamic that the code pins to a constant",
        "guard specialisation",
        "pinned_batch",
        _serve("serve_batch_32"),
        Expect("build", ("build.export_failed",), message=("batch",)),
        bare="export failed",
    ),
    Case(
        "pinned_batch_neighbors",
        P + "134137",
        "dynamic export refused: the dim was inferred to be a constant",
        "guard specialisation",
        "pinned_batch",
        _serve("serve_batch_32"),
        Expect("build", ("build.export_failed",), message=("batch",)),
        bare="export failed",
    ),
    Case(
        "full_of_size",
        P + "143667",
        "torch.full sized by an input dim: Inductor could specialise on it",
        "guard specialisation",
        "full_of_size",
        _serve("serve_rows_13"),
        Expect("runs"),
    ),
    Case(
        "custom_op_no_python",
        P + "145394",
        "a Python custom op the package needs at run time, absent in the serving process",
        "custom op",
        "custom_op",
        Serve("tests/realbugs/custom_op_model.py:serve", eager=False),
        # the build imports the factory's module in its children (the op registers: the package builds);
        # a serving process that has not imported it is refused by the op's name, with the remedy
        Expect("serve", ("load.missing_op",), names=("realbugs::scaled_tanh",)),
        bare="error",
    ),
    Case(
        "custom_op_message",
        P + "134581",
        "a missing Python custom op reported only as a missing schema",
        "custom op",
        "custom_op",
        Serve("tests/realbugs/custom_op_model.py:serve", eager=False),
        # the build imports the factory's module in its children (the op registers: the package builds);
        # a serving process that has not imported it is refused by the op's name, with the remedy
        Expect("serve", ("load.missing_op",), names=("realbugs::scaled_tanh",)),
        bare="error",
    ),
    Case(
        "data_dependent_check",
        P + "150539",
        "a torch._check on an .item() value: a valid model that must build and refuse b >= y.shape[0]",
        "data-dependent",
        "prefix",
        _serve("serve_b_past_y"),
        Expect("serve", names=("b", "y.shape[0]")),
    ),
    Case(
        "fp16_overflow",
        P + "183607",
        "float16 x*x overflows to inf in eager, not in the fused kernel",
        "half precision",
        "fp16_overflow",
        _serve("serve_near_300"),
        Expect("build", message=("emulate_precision_casts",)),
        bare="wrong",
    ),
    Case(
        "bf16_rope",
        P + "159239",
        "bfloat16 rotary embedding: Inductor elides the per-op rounding",
        "half precision",
        "bf16_rope",
        _serve("serve_rope"),
        Expect("runs"),
        bare="ok",
        pending=False,  # within bfloat16's tolerance of eager on torch 2.13, edge-rounding samples included: nothing to catch
    ),
    Case(
        "bf16_rope_cpu",
        P + "182225",
        "bfloat16 rotate_half RoPE differs from eager on CPU",
        "half precision",
        "bf16_rope",
        _serve("serve_rope"),
        Expect("runs"),
        bare="ok",
        pending=False,  # within bfloat16's tolerance of eager on torch 2.13, edge-rounding samples included: nothing to catch
    ),
    Case(
        "bf16_threshold",
        P + "128306",
        "a bfloat16 score compared with 0.2 differs at the threshold",
        "half precision",
        "bf16_threshold",
        _serve("serve_near_threshold"),
        # torch 2.13 and 2.15 compare in bfloat16 as eager does; 2.11 compares in float32 and flips
        # 0.2002 (bare: wrong values): its build is refused on the edge-threshold sample
        Expect("runs", ("build.validation_failed",)),
        pending=False,
    ),
    Case(
        "shared_storage",
        P + "186176",
        "constants serialised with their whole shared storage (views of one tensor)",
        "package size",
        "shared_storage",
        _serve("serve_views"),
        Expect("warn", message=("a", "storage")),
    ),
    Case(
        "weightless_package",
        P + "142246",
        "a package built without its weights, called before load_constants",
        "weights",
        "noweights",
        _serve("serve_x_static"),
        Expect("serve", ("constants.missing",), ("lin.weight",)),
        bare="crash",
    ),
    Case(
        "weightless_then_loaded",
        P + "142246",
        "the same package, its weights given first (the intended use)",
        "weights",
        "noweights",
        _serve("serve_x_static", weights=f"{M}:weights_full"),
        Expect("runs"),
    ),
    Case(
        "weights_transposed",
        P + "180446",
        "load_constants with a transposed view of a weight",
        "weights",
        "static",
        _serve("serve_x_static", weights=f"{M}:weights_transposed"),
        Expect("serve", ("constants.layout",), ("lin.weight",)),
        bare="wrong",
    ),
    Case(
        "weights_bf16",
        P + "179225",
        "load_constants with a bfloat16 weight for a float32 constant",
        "weights",
        "static",
        _serve("serve_x_static", weights=f"{M}:weights_bf16"),
        Expect("serve", ("constants.dtype_mismatch",), ("lin.weight",)),
        bare="wrong",
    ),
    Case(
        "weights_one_larger",
        P + "179225",
        "load_constants with a weight one row larger than compiled",
        "weights",
        "static",
        _serve("serve_x_static", weights=f"{M}:weights_one_larger"),
        Expect("serve", ("constants.shape_mismatch",), ("lin.weight",)),
    ),
    Case(
        "buffer_counter",
        P + "165444",
        "a buffer updated in place on every call (a counter) in an AOTI package",
        "state",
        "counter",
        _serve("serve_ones", calls=3),
        Expect("build", ("build.stateful_model",)),
    ),
    Case(
        "buffer_mul",
        P + "120424",
        "a buffer multiplied in place in forward: the mutation must persist",
        "state",
        "counter",
        _serve("serve_ones", calls=3),
        Expect("build", ("build.stateful_model",)),
    ),
    Case(
        "small_buffer_inlined",
        P + "169118",
        "a one-element buffer inlined as a constant, then mutated",
        "state",
        "counter",
        _serve("serve_ones", calls=3),
        Expect("build", ("build.stateful_model",)),
    ),
    Case(
        "buffer_slice_assign",
        P + "114967",
        "part of a buffer assigned in forward (a cache slot): the compile must keep the write",
        "state",
        "counter",
        _serve("serve_ones", calls=3),
        Expect("build", ("build.stateful_model",)),
    ),
    Case(
        "threads_one_runner",
        P + "134946",
        "many threads calling one AOTI runner: throughput does not scale",
        "threads",
        "matmul_chain",
        _serve("serve_matmul_chain"),
        Expect("probe", names=("callers", "calls/s", "runner"), probe_args=("--threads", "2")),
    ),
    Case(
        "threads_one_instance",
        P + "148937",
        "the package loader made one model instance: other threads block",
        "threads",
        "matmul_chain",
        _serve("serve_matmul_chain"),
        Expect("probe", names=("callers", "calls/s", "runner"), probe_args=("--threads", "2")),
    ),
    Case(
        "threads_144459",
        P + "144459",
        "AOTI throughput across threads (issue 42's list)",
        "threads",
        "matmul_chain",
        _serve("serve_matmul_chain"),
        Expect("probe", names=("callers", "calls/s", "runner"), probe_args=("--threads", "2")),
    ),
    Case(
        "threads_shared_memory",
        P + "154094",
        "one package shared by instances on several cores: throughput drops",
        "threads",
        "matmul_chain",
        _serve("serve_matmul_chain"),
        Expect("probe", names=("callers", "calls/s", "runner"), probe_args=("--threads", "2")),
    ),
    Case(
        "isa_safe_direction",
        P + "191713",
        "the ISA warning fires for an AVX2 package on an AVX-512 host (the safe way)",
        "toolchain/ISA",
        "static",
        _serve("serve_x_static"),
        Expect("probe"),
    ),
    Case(
        "isa_beyond_fleet",
        P + "121516",
        "a package built with AVX-512 dies with SIGILL on an AVX2 host",
        "toolchain/ISA",
        "static_native",
        _serve("serve_x_static"),
        Expect("warn", ("build.isa_beyond_baseline",)),
    ),
    Case(
        "cuda_package_no_gpu",
        P + "145730",
        "a CUDA package loaded in a process without CUDA",
        "device",
        "cuda_example",
        _serve("serve_cuda_example", eager=False),
        Expect("probe", ("env.device_unavailable", "env.gpu_runtime_missing", "env.device_mismatch")),
        no_gpu_host=True,
    ),
    Case(
        "kernel_file_missing",
        P + "120194",
        "a package whose kernel file is not where its code looks: 'CUDA driver error: file not found', no file named",
        "device",
        "cuda_example",  # its kernel paths were blanked when it was committed (scripts/gpu/sanitize_fixture.py)
        _serve("serve_cuda_example", eager=False, device="cuda:0"),
        Expect("probe", ("package.kernel_file_missing",), names=("triton_poi_fused_1",)),
        gpu=True,
    ),
    Case(
        "cuda_index_1",
        P + "136369",
        "a package loaded on cuda:1 of a multi-GPU host",
        "device",
        "cuda_mlp",
        _serve("serve_cuda_mlp", device="cuda:1"),
        Expect("runs"),
        gpu=True,
    ),
    Case(
        "loader_cuda0_only",
        P + "152087",
        "the C++ package loader places every model on cuda:0",
        "device",
        "cuda_mlp",
        _serve("serve_cuda_mlp", device="cuda:1"),
        Expect("runs"),
        gpu=True,
    ),
    Case(
        "cross_device_copy",
        P + "152130",
        "x.to('cuda:1') inside the model: the output stays on cuda:0",
        "device",
        "cross_gpu",
        _serve("serve_cuda_mlp", device="cuda:0"),
        Expect("build", ("build.compile_failed",), message=("one CUDA device",)),
        gpu=True,
    ),
)


def by_name(name: str) -> Case:
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(name)


def distinct_reports() -> set[str]:
    return {c.report for c in CASES}
