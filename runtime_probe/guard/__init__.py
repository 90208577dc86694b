"""runtime_probe.guard."""
