"""``BuildState``: what the build's steps (pipeline.py, twin_step.py) hand each other."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aoti_guard.builder.validate.tolerance import ToleranceRule

if TYPE_CHECKING:
    from aoti_guard.builder.compile.constant_digests import ConstantDigests
    from aoti_guard.builder.export import determinism
    from aoti_guard.builder.options import BuildOptions
    from aoti_guard.builder.resolve.binding import Binding
    from aoti_guard.builder.twin import schedule as twin_mod
    from aoti_guard.builder.validate import run as validate
    from aoti_guard.pt2 import writer as package_mod
    from aoti_guard.pt2.signing import SigningKey
    from aoti_guard.spec import BuildSpec
    from runtime_probe.child.worker import Worker
    from runtime_probe.package.manifest import IOContract

__all__ = ["BuildState"]


@dataclass
class BuildState:
    """What the steps hand each other. Filled in order: spec -> ep/contract -> release -> twin -> outcome."""

    target: str | BuildSpec | None
    options: BuildOptions
    work: str
    worker: Worker
    out_path: str
    signer: SigningKey | None
    note: Callable[[str], None]
    extra: dict[str, Any] = field(default_factory=dict)
    spec: BuildSpec | None = None
    is_program: bool = False
    dynamic: Any = None
    eager_fn: Any = None
    binding: Binding | None = None  # the example bound to the model's signature, once (resolve step)
    ep: Any = None
    contract: IOContract | None = None
    configs: Mapping[str, Any] = field(default_factory=dict)
    release_pt2: str = ""
    twin_pt2: str | None = None
    twin_child: twin_mod.TwinChild | None = None  # the twin compiling beside the release model (twin/schedule.py)
    twin_not_in_child: str | None = None  # why the twin, scheduled for a child, is compiled here
    outcome: validate.Validation | None = None
    release_hashes: package_mod.EntryHashes | None = None  # the release package's entries, hashed while validation runs
    constant_digests: ConstantDigests | None = None  # the program's constants, hashed while the release model compiles
    report_path: str = ""
    export_guards_failed: bool = False  # an export guard not accepted (build.export_specialized): the package is rejected
    cpu_isa: str | None = None  # the CPU level compiled for: --cpu-isa, or targets.DEFAULT_CPU_ISA (None: native)
    example_outputs: Any = None  # eager's outputs on the example, from the export step
    graph_state: determinism.GraphState | None = None  # random ops and buffer updates in the exported graph
    user_code: Any = None  # user_code.UserCode: custom ops and user Triton kernels in the exported graph (memcheck's trigger)
    user_samples: list[Any] = field(default_factory=list)  # --samples / BuildSpec.samples, checked (export/user_samples.py)
    # the TARGET's module, which every child that loads the program or the package imports first when
    # the program calls custom ops (runtime_probe/runtime/user_modules.py); set by the export step
    user_modules: tuple[str, ...] = ()
    # compiled vs eager: --atol/--rtol against the dtypes' defaults, made once from the options here
    # and handed to validation, which carries it to every comparison and to the manifest
    tolerance: ToleranceRule = field(init=False)

    def __post_init__(self) -> None:
        self.tolerance = ToleranceRule.from_options(self.options)
