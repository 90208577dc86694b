"""How to probe: the options and the phase names, a leaf module (nothing it imports imports it back)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["PHASES", "ProbeOptions", "ProgressFn"]

PHASES = ("archive", "host", "load", "constants", "golden", "escalate")


@dataclass(frozen=True)
class ProbeOptions:
    """How to probe.

    Attributes:
        device: "cpu", "cuda" or "cuda:N"; None = the device the package was built for.
        weights: a safetensors file to validate and load in place of the package's constants.
        inputs: a safetensors file of inputs (keys = input names) to run after the golden samples,
            e.g. inputs captured from a failing request.
        inputs_device: where to place ``inputs`` (default: the model's device); "cpu" replays a
            caller that forgot to move them.
        fast: the container pre-flight: archive, host, load and one golden sample.
        timeout_s: limit for each child request (load, one golden run).
        escalate: climb the escalation ladder when loading or running fails.
        escalate_timeout_s: bound on the whole ladder.
        memcheck / no_memcheck: force / skip the golden samples' rerun under compute-sanitizer
            memcheck (ladder/memcheck.py); neither: where the manifest records user GPU code.
        all_devices: probe every visible GPU, in parallel.
        python: the interpreter the child runs (the probe's own by default).
        env: extra environment for the child.
        public_key: an Ed25519 public key file (PEM): the package must carry a valid signature by
            it, checked before the manifest is believed and before anything native is opened.
        iterations: time at least this many more calls of each golden sample (and --inputs) after
            the judged run and report their latency (runtime_probe/reporting/latency.py); 1 = no timing runs.
        warmup: untimed calls before the timed ones (when timing).
        duration_s: time calls for at least this many seconds (and at least ``iterations`` calls);
            None: ``iterations`` alone decides.
        shapes: ``x:4x16,mask:4x32``: one more run (and its timing) at these sizes, with inputs
            made as the build makes golden samples (probe/shapes.py); a tuple of such sets runs
            (and times) each of them, in order, each labelled with its sizes.
        save_inputs / save_outputs: folders where each golden run's inputs / outputs are written as
            ``SAMPLE.inputs.safetensors`` / ``SAMPLE.outputs.safetensors`` (an inputs file is what
            ``inputs`` takes back, e.g. to replay it elsewhere).
        latency_raw: a file the timed runs' raw per-call times are written to, as JSON (runs ->
            label -> ``times_s``, probe/raw_times.py); a file, never stdout. Needs ``iterations`` > 1 or
            ``duration_s``.
        verify_only: the archive phase alone (safe zip, entry hashes, signature, manifest rules):
            the standard library only, no child, torch never imported; the other phases are
            reported as skipped.
    """

    device: str | None = None
    weights: str | None = None
    inputs: str | None = None
    inputs_device: str | None = None
    fast: bool = False
    timeout_s: float = 300.0
    escalate: bool = True
    escalate_timeout_s: float = 600.0
    memcheck: bool = False  # --memcheck: memcheck the golden samples whatever the manifest records
    no_memcheck: bool = False  # --no-memcheck: never (default: where the manifest records user GPU code)
    all_devices: bool = False
    python: str | None = None
    env: Mapping[str, str | None] = field(default_factory=dict)
    public_key: str | None = None
    iterations: int = 1
    save_inputs: str | None = None
    save_outputs: str | None = None
    verify_only: bool = False
    warmup: int = 10
    duration_s: float | None = None
    shapes: str | tuple[str, ...] | None = None
    latency_raw: str | None = None


ProgressFn = Callable[[str, str], None]
