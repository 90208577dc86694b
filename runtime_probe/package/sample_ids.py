"""The manifest's rule for golden sample ids, and the names the probe keeps for its own runs.

A sample id names its sample in every report and, with ``--save-inputs``/``--save-outputs``, the
files ``SAMPLE.inputs.safetensors``; it must be a plain name (``runtime_probe.reporting.paths``), one per
sample, and not the name of one of the probe's own runs (``inputs``, ``shapes``), whose files and
report lines it would take over. The manifest's rules (``manifest_rules``: ``manifest.invalid``)
are the first to know, so the rule lives beside them, not in ``golden/`` (which reads the manifest
and so cannot be read by it).
"""

from __future__ import annotations

from collections.abc import Iterator

from runtime_probe.package.manifest import Golden
from runtime_probe.reporting.paths import plain_name_problem

__all__ = ["PROBE_RUNS", "id_problems", "is_probe_run"]

# The probe's own runs, named like samples in its reports and in the files --save-inputs writes.
PROBE_RUNS = ("inputs", "shapes")


def is_probe_run(sample_id: str) -> bool:
    """``sample_id`` names one of the probe's own runs: --inputs, --shapes, or one of several
    --shapes sets (``shapes1``, ``shapes2``...: probe/shapes.py ``run_names``)."""
    return sample_id in PROBE_RUNS or (sample_id.startswith("shapes") and sample_id[6:].isascii() and sample_id[6:].isdigit())


def id_problems(golden: Golden) -> Iterator[str]:
    """Why the manifest's golden sample ids cannot be used, one line each (read after "the manifest")."""
    seen: set[str] = set()
    ids = [s.id for s in golden.samples] + [s.id for s in golden.compact_samples or ()]
    for sample_id in ids:
        why = plain_name_problem(sample_id)
        if why is not None:
            yield f"names a golden sample {sample_id[:80]!r}, which {why} (a sample id becomes a file name with --save-inputs)"
        elif is_probe_run(sample_id):
            flag = "--inputs" if sample_id == "inputs" else "--shapes"
            yield f"names a golden sample {sample_id!r}, the name of the probe's own {flag} run"
        elif sample_id in seen:
            yield f"names two golden samples {sample_id!r} (their reports and saved files would be one)"
        seen.add(sample_id)
