"""The probe: ``probe(path, ProbeOptions(...)) -> Report``.

``run`` orchestrates the phases (``phases``) and the escalation ladder; ``options`` is the leaf that
both import.
"""

from runtime_probe.probe.options import PHASES, ProbeOptions, ProgressFn
from runtime_probe.probe.run import probe

__all__ = ["PHASES", "ProbeOptions", "ProgressFn", "probe"]
