"""The probe's command-line flags, declared once as data for both command lines.

``python -m runtime_probe`` (argparse: the standard library only) and ``aoti-guard probe`` (click)
both generate their probe flags from ``PROBE_FLAGS``: argparse through ``add_to_parser`` here,
click through ``aoti_guard.cli``. Defaults are read from ``ProbeOptions`` (their one home), and
``probe_options`` turns parsed values into a ``ProbeOptions`` the same way for both.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime_probe.probe.options import ProbeOptions

__all__ = ["OUTPUT_FLAGS", "PROBE_FLAGS", "Flag", "Outputs", "add_to_parser", "option_fields", "outputs_of", "probe_options"]


@dataclass(frozen=True)
class Flag:
    """One flag. ``field``: the ProbeOptions field it sets (None: a CLI-level flag kept in
    ``Outputs``); ``kind``: "str", "path", "folder", "float", "int" or "switch"; ``invert``: a switch that sets
    its field to False (``--no-escalate`` -> ``escalate=False``); ``minimum``: the smallest value."""

    name: str
    help: str
    kind: str = "str"
    field: str | None = None
    metavar: str | None = None
    minimum: float | None = None
    invert: bool = False
    short: str | None = None
    default: Any = None
    multiple: bool = False  # repeatable: the values given, in order, as a tuple (None: not given)

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")

    @property
    def default_value(self) -> Any:
        """The default, from ProbeOptions when the flag sets one of its fields."""
        if self.kind == "switch":
            return False
        if self.multiple:  # argparse appends to the default: None, never the options' empty tuple
            return None
        if self.field is not None:
            return getattr(ProbeOptions, self.field)
        return self.default

    def field_value(self, value: Any) -> tuple[bool, Any]:
        """(whether the flag sets its field, the field's value) from its parsed ``value``: a
        repeatable flag given no value leaves the field's default (argparse's list is None when
        absent, click's tuple empty); an inverting switch sets False when given."""
        if self.multiple:
            if not value:
                return False, None
            value = tuple(value)
        return True, (not value) if self.invert else value


def option_fields(flags: Sequence[Flag], values: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a table's flags set, from their parsed values keyed by ``Flag.dest``: the one
    place parsed flags become an options dataclass's fields, for every table (the probe's here,
    the build's and the fleet's through ``aoti_guard.flags``; each kind's conversion is its
    flag's ``field_value``). A flag absent from ``values``, or given nothing, is left out."""
    fields: dict[str, Any] = {}
    for flag in flags:
        if flag.field is None or flag.dest not in values:
            continue
        sets, value = flag.field_value(values[flag.dest])
        if sets:
            fields[flag.field] = value
    return fields


PROBE_FLAGS: tuple[Flag, ...] = (
    Flag("--device", "cpu, cuda or cuda:N (default: the device the package was built for)", field="device"),
    Flag(
        "--weights",
        "a .safetensors file: validated against the contract, then loaded in place of the package's constants",
        kind="path",
        field="weights",
        metavar="FILE",
    ),
    Flag(
        "--inputs",
        "a .safetensors file of inputs (keys = input names) to run after the golden samples, e.g. captured from a failing request",
        kind="path",
        field="inputs",
        metavar="FILE",
    ),
    Flag(
        "--inputs-device",
        "place --inputs on this device instead of the model's (cpu replays a caller that forgot .cuda())",
        field="inputs_device",
        metavar="D",
    ),
    Flag(
        "--public-key",
        "an Ed25519 public key (PEM, from aoti-guard keygen): require a valid signature by it before anything is opened",
        kind="path",
        field="public_key",
        metavar="KEY.pub",
    ),
    Flag("--fast", "pre-flight: archive, host, load and one golden sample", kind="switch", field="fast"),
    Flag(
        "--verify-only",
        "the archive phase alone: safe zip, entry hashes, signature (with --public-key) and manifest rules; "
        "the standard library only, torch is never imported",
        kind="switch",
        field="verify_only",
    ),
    Flag(
        "--all-devices",
        "probe every visible GPU in parallel, one child per device, a report section per device",
        kind="switch",
        field="all_devices",
    ),
    Flag(
        "--no-escalate",
        "do not rerun a failure with more instruments (strict checks, debug twin, sanitizer, debugger, remedies)",
        kind="switch",
        field="escalate",
        invert=True,
    ),
    Flag(
        "--memcheck",
        "run the golden samples once more under compute-sanitizer memcheck, caching allocator off, and fail on an "
        "out-of-bounds access (default: on for a CUDA package whose manifest records user Triton kernels or custom ops)",
        kind="switch",
        field="memcheck",
    ),
    Flag(
        "--no-memcheck",
        "never run compute-sanitizer memcheck on the golden samples (CPU packages never do: memcheck checks CUDA kernels only)",
        kind="switch",
        field="no_memcheck",
    ),
    Flag("--escalate-timeout", "seconds the whole escalation may take", kind="float", field="escalate_timeout_s", metavar="S", minimum=1),
    Flag("--timeout", "seconds each load or golden run may take", kind="float", field="timeout_s", metavar="S", minimum=1),
    Flag(
        "--iterations",
        "time at least N more calls of each golden sample and report the latency (mean ± std, p50/p90/p95/p99 when "
        "there are enough calls, throughput)",
        kind="int",
        field="iterations",
        metavar="N",
        minimum=1,
    ),
    Flag(
        "--duration",
        "time calls of each golden sample for at least S seconds (and at least --iterations calls)",
        kind="float",
        field="duration_s",
        metavar="S",
        minimum=0.001,
    ),
    Flag("--warmup", "untimed calls before the timed ones", kind="int", field="warmup", metavar="N", minimum=0),
    Flag(
        "--shapes",
        "also run (and time) the model at these sizes inside its contract, e.g. x:4x16,mask:4x32; inputs are generated "
        "as the golden samples are, an input left out takes the sizes the others set; repeat the flag to run and time "
        "several sets (--shapes x:1x16 --shapes x:8x16), each labelled with its sizes",
        field="shapes",
        multiple=True,
        metavar="IN:AxB,...",
    ),
    Flag(
        "--import",
        "a Python file or module name that registers the package's custom ops (torch.library; the manifest's "
        "user_code.custom_ops lists them), imported in each child before it loads the package; runs its code; repeatable",
        field="imports",
        metavar="MODULE_OR_FILE",
        multiple=True,
    ),
    Flag(
        "--latency-raw",
        "also write every timed call's seconds here, as JSON: one list per run, named as on its latency line "
        "(needs --iterations or --duration)",
        kind="path",
        field="latency_raw",
        metavar="FILE",
    ),
    Flag(
        "--threads",
        "also measure calls/s with these counts of concurrent callers (threads calling the one loaded model), e.g. "
        "1,2,4, each for --duration seconds (default 1), and say when N callers get no more than one (the package "
        "loaded with one runner serialises them: the remedy, N runners, is tried and reported)",
        field="threads",
        metavar="N,N,...",
    ),
    Flag(
        "--save-inputs",
        "write each golden run's inputs to DIR/SAMPLE.inputs.safetensors (replayable with --inputs)",
        kind="folder",
        field="save_inputs",
        metavar="DIR",
    ),
    Flag(
        "--save-outputs",
        "write each golden run's outputs to DIR/SAMPLE.outputs.safetensors",
        kind="folder",
        field="save_outputs",
        metavar="DIR",
    ),
)

OUTPUT_FLAGS: tuple[Flag, ...] = (
    Flag("--json", "write the JSON report here ('-' = stdout)", kind="path", metavar="PATH"),
    Flag("--junit", "write a JUnit XML report here, a testcase per phase ('-' = stdout)", kind="path", metavar="PATH"),
    Flag(
        "--markdown",
        "write a Markdown summary here, for a pull request or a CI page ('-' = stdout; also appended to "
        "$GITHUB_STEP_SUMMARY when that is set)",
        kind="path",
        metavar="PATH",
    ),
    Flag("--strict", "warnings fail too (exit 1): for release gates", kind="switch"),
    Flag("--log-file", "append torch's warnings and the run's log lines here", kind="path", metavar="PATH"),
    Flag("--quiet", "no progress; the report only when a check fails", kind="switch", short="-q"),
    Flag(
        "--verbose",
        "also show the informational findings of phases that passed (a failed phase shows all of its own)",
        kind="switch",
        short="-v",
    ),
)


@dataclass(frozen=True)
class Outputs:
    """Where and how a run reports: the CLI-level flags of OUTPUT_FLAGS, as one value."""

    json: str | None = None
    junit: str | None = None
    markdown: str | None = None
    strict: bool = False
    log_file: str | None = None
    quiet: bool = False
    verbose: bool = False


def _number(kind: str, minimum: float | None, name: str) -> Any:
    cast = float if kind == "float" else int

    def parse(text: str) -> float | int:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if cast is int else ' number'}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be at least {minimum:g} (got {text})")
        return value

    return parse


def add_to_parser(parser: argparse.ArgumentParser, flags: Sequence[Flag]) -> None:
    """Add ``flags`` to an argparse parser (help texts show the default where there is one)."""
    for flag in flags:
        names = [flag.short, flag.name] if flag.short else [flag.name]
        if flag.kind == "switch":
            parser.add_argument(*names, dest=flag.dest, action="store_true", help=flag.help)
            continue
        default = flag.default_value
        text = (
            flag.help
            if default is None
            else f"{flag.help} (default {default:g})"
            if isinstance(default, float)
            else f"{flag.help} (default {default})"
        )
        kwargs: dict[str, Any] = {"dest": flag.dest, "default": default, "help": text, "metavar": flag.metavar}
        if flag.kind in ("float", "int"):
            kwargs["type"] = _number(flag.kind, flag.minimum, flag.name)
        if flag.multiple:
            kwargs["action"] = "append"
        parser.add_argument(*names, **kwargs)


def probe_options(values: Mapping[str, Any], **extra: Any) -> ProbeOptions:
    """ProbeOptions from parsed flag values (keyed by ``Flag.dest``), for either command line."""
    return dataclasses.replace(ProbeOptions(), **option_fields(PROBE_FLAGS, values), **extra)


def outputs_of(values: Mapping[str, Any]) -> Outputs:
    """The output flags' values as one ``Outputs``."""
    return Outputs(**{f.dest: values[f.dest] for f in OUTPUT_FLAGS if f.dest in values})
