"""How one golden sample is judged, decided once for the build (builder/validate/compare.py) and
the probe (runtime_probe/probe/golden_phase.py): where NaN/Inf are the expected answer, and whether
the sample keeps a tolerance of its own.

A half-precision edge sample (``recipe.EDGE_SAMPLE_IDS``) is made to overflow: NaN/Inf where eager
holds the same value (``inf - inf`` after an overflow is NaN in both) is its answer, and it keeps
its own stored tolerance, so that its artificial values never widen the one every other sample of
the output is held to. A build with ``--allow-nonfinite`` (recorded as ``golden.allow_nonfinite``)
takes matched NaN/Inf as the answer on every sample. A NaN/Inf where the reference holds another
value, or a finite one, is a mismatch under either rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_probe.golden.recipe import EDGE_SAMPLE_IDS

__all__ = ["SampleRule", "sample_rule"]


@dataclass(frozen=True)
class SampleRule:
    """One sample's rule. ``matched_nonfinite``: NaN/Inf where the reference holds the same value
    pass (NaN equal to NaN), and a non-finite output is no error by itself; otherwise any NaN/Inf in
    a compiled output is its own error (``build.nonfinite``, ``run.nonfinite``). ``own_tolerance``:
    the build stores the sample's tolerance beside the output's shared one, measured on it alone."""

    matched_nonfinite: bool
    own_tolerance: bool


def sample_rule(sample_id: str, *, allow_nonfinite: bool) -> SampleRule:
    """The rule of the golden sample ``sample_id`` in a build made with (or without) ``--allow-nonfinite``."""
    edge = sample_id in EDGE_SAMPLE_IDS
    return SampleRule(matched_nonfinite=allow_nonfinite or edge, own_tolerance=edge)
