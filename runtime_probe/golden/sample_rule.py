"""How one golden sample is judged, decided once for the build (builder/validate/compare.py) and
the probe (runtime_probe/probe/golden_phase.py): where NaN/Inf are the expected answer, and whether
the sample keeps a tolerance of its own.

A half-precision edge sample (``recipe.EDGE_SAMPLE_IDS``) is made to overflow: NaN/Inf where eager
holds the same value (``inf - inf`` after an overflow is NaN in both) is its answer, and it keeps
its own stored tolerance, so that its artificial values never widen the one every other sample of
the output is held to. A build with ``--allow-nonfinite`` (recorded as ``golden.allow_nonfinite``)
takes matched NaN/Inf as the answer on every sample. A NaN/Inf where the reference holds another
value, or a finite one, is a mismatch under either rule.

The threshold sample (``edge-threshold``) puts inputs at the constants the program compares them
with, as their dtype rounds them: there a float64 copy of the model compares with the unrounded
constant and so disagrees with eager by construction (bfloat16 0.2001953125 > 0.2 is true in
float64, false in eager's bfloat16), and it would accept the very flip the sample is made to catch
(pytorch#128306). On it the build's float64 rule (a difference accepted for being as close to
float64 as eager is) does not apply.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_probe.golden.recipe import EDGE_SAMPLE_IDS, THRESHOLD, edge_sample_id

__all__ = ["SampleRule", "sample_rule"]


@dataclass(frozen=True)
class SampleRule:
    """One sample's rule. ``matched_nonfinite``: NaN/Inf where the reference holds the same value
    pass (NaN equal to NaN), and a non-finite output is no error by itself; otherwise any NaN/Inf in
    a compiled output is its own error (``build.nonfinite``, ``run.nonfinite``). ``own_tolerance``:
    the build stores the sample's tolerance beside the output's shared one, measured on it alone.
    ``fp64_accepts``: the build may accept a difference from eager for being as close to float64
    as eager is (off on the threshold sample)."""

    matched_nonfinite: bool
    own_tolerance: bool
    fp64_accepts: bool = True


def sample_rule(sample_id: str, *, allow_nonfinite: bool) -> SampleRule:
    """The rule of the golden sample ``sample_id`` in a build made with (or without) ``--allow-nonfinite``."""
    edge = sample_id in EDGE_SAMPLE_IDS
    return SampleRule(matched_nonfinite=allow_nonfinite or edge, own_tolerance=edge, fp64_accepts=sample_id != edge_sample_id(THRESHOLD))
