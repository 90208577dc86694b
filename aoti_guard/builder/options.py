"""How to build: ``BuildOptions`` and the phase names, a leaf module (nothing it imports imports it back)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aoti_guard.builder.resolve.dynamic import DynamicDim, parse_dynamic

__all__ = ["PHASES", "BuildOptions", "ProgressFn"]

ProgressFn = Callable[[str, str, float | None], None]  # (phase, "start" | status | message, seconds)
PHASES = ("resolve", "export", "compile", "validate", "debug_twin", "package")  # + "minify" with --minify


@dataclass(frozen=True)
class BuildOptions:
    """How to build. ``output`` must end in .pt2 (torch's loader insists)."""

    output: str
    device: str = "auto"  # "auto": the factory's tensors' (builder/resolve/device.py); the resolve step sets the real one
    # --dynamic, typed; text as the flag takes it ("x:0=batch:1..64") is parsed when the options are made
    dynamic: tuple[DynamicDim, ...] = ()
    inductor_configs: Mapping[str, Any] = field(default_factory=dict)
    debug_twin: bool = True
    twin_schedule: str = "auto"  # "auto" | "concurrent" | "after" (builder/twin/schedule.py)
    twin_weights: str = "auto"  # "auto" | "shared" | "own" (builder/twin/schedule.py)
    trace_dir: str | None = None
    allow_nonfinite: bool = False
    allow_partial_coverage: bool = False  # a dynamic range whose min or max has no golden sample only warns
    # export's shape guards (h*w == 64) only warn; they are enforced at load and the samples satisfy them
    allow_export_guards: bool = False
    golden_max_bytes: int = 16 * 1024 * 1024
    samples: tuple[str, ...] = ()  # --samples: .safetensors files of golden inputs of the user's own (builder/export/user_samples.py)
    fp64_reference: bool = True
    # compute-sanitizer memcheck over the golden samples (validate/run.py): None runs it on a CUDA
    # build whose program holds user Triton kernels or custom ops; True: always on CUDA; False: never
    memcheck: bool | None = None
    atol: float | None = None
    rtol: float | None = None
    seed: int = 0
    timeout_s: float = 600.0
    reference: str | None = None  # "onnxruntime": a second reference for validation
    keep_onnx: str | None = None  # where to keep the exported .onnx (needs reference)
    minify: bool = False  # run the AOTI minifier on a compile failure or a compiler-suspect mismatch
    minify_timeout_s: float = 300.0
    sign_key: str | None = None  # an Ed25519 private key file: sign the package before it is written
    # "native" | "x86-64-v2" | "x86-64-v3" | "x86-64-v4"; None: targets.DEFAULT_CPU_ISA (builder/compile/targets.py)
    cpu_isa: str | None = None
    cuda_archs: tuple[str, ...] = ()  # compute capabilities the kernels must cover, e.g. ("80", "90")

    def __post_init__(self) -> None:
        # the one parse of --dynamic text, for the command line and a library caller alike: every
        # step reads the typed dims, and a bad spec is a UsageError before anything runs
        given: tuple[DynamicDim | str, ...] = tuple(self.dynamic)
        if any(isinstance(d, str) for d in given):
            texts = [d if isinstance(d, str) else d.text for d in given]
            object.__setattr__(self, "dynamic", tuple(parse_dynamic(texts)))
