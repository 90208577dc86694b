"""The build's command-line flags, declared once as data: ``BUILD_FLAGS`` and ``build_options``.

Each flag names the ``BuildOptions`` field it sets, and its default is read from ``BuildOptions``
(the one home of every build default; tests/unit/test_build_flags.py fails when a field has no
flag, two, or a default of its own). ``aoti_guard.cli`` generates the click options from the
table (as it does for the probe's ``runtime_probe.probe.flags.PROBE_FLAGS``), and
``build_options`` turns the parsed values into the ``BuildOptions`` the build takes. The choices a
flag accepts are read from the module that decides them (the twin's schedules, the CPU ISA levels,
the second references), so a new one needs no edit here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from aoti_guard.builder.compile.targets import CPU_ISA_LEVELS, parse_cuda_archs
from aoti_guard.builder.options import BuildOptions
from aoti_guard.builder.twin.schedule import SCHEDULES, WEIGHTS
from aoti_guard.builder.validate.onnx_reference import REFERENCES
from aoti_guard.flags import OptionFlag, option_fields
from runtime_probe.reporting.errors import UsageError

__all__ = ["BUILD_FLAGS", "MIB", "BuildFlag", "build_options", "parse_inductor_configs"]

MIB = 1024 * 1024


class BuildFlag(OptionFlag):
    """A build flag: its field is one of BuildOptions', its default BuildOptions' (``OptionFlag``)."""

    SOURCE = BuildOptions


def parse_inductor_configs(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items as Inductor configs: a JSON value (true, 4, {...}) or a bare string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"cannot read --inductor-config {item!r}", hint="write KEY=VALUE, e.g. --inductor-config max_autotune=true")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _cuda_archs(text: str) -> tuple[str, ...]:
    try:
        return parse_cuda_archs(text)
    except ValueError as exc:
        raise UsageError(str(exc), hint="e.g. --cuda-arch 8.0,9.0 (compute capabilities, comma-separated)") from None


BUILD_FLAGS: tuple[BuildFlag, ...] = (
    BuildFlag(
        "--output",
        "The package to write (must end in .pt2; a missing folder is created)",
        field="output",
        short="-o",
        metavar="OUT.pt2",
        required=True,
    ),
    BuildFlag(
        "--device",
        "auto, cpu, cuda or cuda:N: where the model is exported, compiled and validated. auto: the device of the factory's "
        "model and example (a factory that mixes devices is refused, naming the tensors); any other value moves the model "
        "and the example there",
        field="device",
        metavar="DEVICE",
    ),
    BuildFlag(
        "--dynamic",
        "A dynamic dimension, e.g. x:0=batch:1..64 (repeat; a shared NAME ties sizes together). A derived size, as "
        "torch.export suggests for multiples: ids:1=8*seq8:1..64 (the range is NAME's)",
        field="dynamic",
        multiple=True,
        metavar="IN:DIM=[A*]NAME[+B][:MIN..MAX]",
    ),
    BuildFlag(
        "--inductor-config",
        "An Inductor option for the release model (repeat), e.g. max_autotune=true",
        field="inductor_configs",
        multiple=True,
        metavar="KEY=VALUE",
        convert=parse_inductor_configs,
        param="configs",
    ),
    BuildFlag(
        "--no-debug-twin",
        "Do not compile the sanitized debug twin (a second compile of the model, beside the release one; its .so adds the "
        "generated code, and the weights again with --twin-weights own)",
        kind="switch",
        field="debug_twin",
        invert=True,
    ),
    BuildFlag(
        "--twin-schedule",
        "Where the twin compiles: concurrent (a child process beside the release compile), after (here, after the release "
        "model, reusing its Triton kernels: one compile of them, for a host short of CPU); auto: concurrent (measured "
        "faster on CPU and on an H100)",
        kind="choice",
        field="twin_schedule",
        choices=SCHEDULES,
    ),
    BuildFlag(
        "--twin-weights",
        "Where the twin's weights are: shared (none of its own: the package stores the weights once, and the probe and "
        "runtime_probe.load give the twin the release model's), own (a second copy in the twin, about doubling the "
        "package); auto: shared, on CPU and CUDA alike",
        kind="choice",
        field="twin_weights",
        choices=WEIGHTS,
    ),
    BuildFlag("--trace-dir", "Write a TORCH_TRACE here (open it with tlparse)", kind="folder", field="trace_dir"),
    BuildFlag(
        "--cpu-isa",
        "CPU instruction set the package's code may use. Default x86-64-v3 (AVX2: portable, and measured as fast as native "
        "on Inductor's code; native on torch 2.11, which has no lever); native: this CPU's; x86-64-v4: AVX-512",
        kind="choice",
        field="cpu_isa",
        choices=tuple(CPU_ISA_LEVELS),
    ),
    BuildFlag(
        "--cuda-arch",
        "CUDA archs the kernels must cover, e.g. 8.0,9.0 (checked)",
        field="cuda_archs",
        metavar="CC,...",
        convert=_cuda_archs,
        param="cuda_arch",
    ),
    BuildFlag("--allow-nonfinite", "Do not fail the build when an output holds NaN/Inf", kind="switch", field="allow_nonfinite"),
    BuildFlag(
        "--allow-partial-coverage",
        "Only warn when no golden sample reaches a dynamic dimension's minimum or maximum (default: the build fails)",
        kind="switch",
        field="allow_partial_coverage",
    ),
    BuildFlag(
        "--allow-export-guards",
        "Accept shape guards torch.export assumed (e.g. h*w == 64): the guarded loader then refuses sizes that break them, "
        "and the golden samples satisfy them (default: the build fails with build.export_specialized)",
        kind="switch",
        field="allow_export_guards",
    ),
    BuildFlag(
        "--golden-max-mb",
        "Size cap for the golden samples stored in the package",
        kind="float",
        field="golden_max_bytes",
        minimum=0,
        unit=MIB,
    ),
    BuildFlag(
        "--samples",
        "A golden sample of your own (repeat): a .safetensors file of one call's inputs, each tensor named by the model's "
        "input name (aoti-guard inspect PKG lists them), e.g. written with safetensors.torch.save_file({'x': x, 'mask': "
        "mask}, 'req1.safetensors'). Checked against the contract before anything compiles (names, dtypes, ranks, sizes "
        "within the dynamic ranges), then validated like the generated samples and stored in the package, so the probe "
        "checks it too; its id is the file's stem",
        kind="path",
        field="samples",
        multiple=True,
        metavar="FILE.safetensors",
    ),
    BuildFlag("--no-fp64", "Skip the float64 reference run", kind="switch", field="fp64_reference", invert=True),
    BuildFlag(
        "--memcheck",
        "Run every golden sample once more under compute-sanitizer memcheck, caching allocator off, and reject the "
        "package on an out-of-bounds access (the kernel, sample and sizes named). Default: on for a CUDA build whose "
        "program holds user Triton kernels or custom ops; --no-memcheck: never. CUDA builds only: memcheck checks GPU "
        "kernels, and a CPU build's kernels are C++ it cannot see (a CPU build ignores the flag)",
        kind="onoff",
        field="memcheck",
    ),
    BuildFlag("--atol", "Absolute tolerance for compiled vs eager (default by dtype)", kind="float", field="atol", minimum=0),
    BuildFlag("--rtol", "Relative tolerance for compiled vs eager (default by dtype)", kind="float", field="rtol", minimum=0),
    BuildFlag("--seed", "Seed for the generated golden inputs", kind="int", field="seed"),
    BuildFlag("--timeout", "Seconds the validation child may take per step", kind="float", field="timeout_s", minimum=1),
    BuildFlag(
        "--reference",
        "A second reference: export to ONNX and compare eager, AOTI and ONNX Runtime on every golden sample",
        kind="choice",
        field="reference",
        choices=REFERENCES,
    ),
    BuildFlag("--keep-onnx", "Keep the ONNX model of --reference onnxruntime here", field="keep_onnx", metavar="PATH"),
    BuildFlag(
        "--minify",
        "When compilation fails or AOTI alone is wrong, run PyTorch's AOTI minifier; repro in OUT.minify/. Without it the "
        "minifier still runs, for at most 120 s, when the stage bisection finds Inductor or the package departing first",
        kind="switch",
        field="minify",
    ),
    BuildFlag("--minify-timeout", "Seconds the minifier may take in all", kind="float", field="minify_timeout_s", minimum=1),
    BuildFlag(
        "--key",
        "Sign the package with this Ed25519 private key (aoti-guard keygen --key KEY; sign takes the same --key); a build "
        "that cannot sign fails",
        kind="path",
        field="sign_key",
        metavar="KEY",
        param="sign_key",
    ),
    # before 0.2 the build's key was --sign-key; still read, with a warning (aoti_guard.cli)
    BuildFlag("--sign-key", "Deprecated spelling of --key", kind="path", metavar="KEY", param="sign_key_deprecated", hidden=True),
)


def build_options(values: Mapping[str, Any]) -> BuildOptions:
    """``BuildOptions`` from the build flags' parsed values, keyed by ``BuildFlag.dest``. A flag
    absent from ``values`` leaves its field's default. Raises UsageError for a value that cannot
    be read (``--inductor-config foo``, ``--cuda-arch hopper``, a ``--dynamic`` spec)."""
    return BuildOptions(**option_fields(BUILD_FLAGS, values))
