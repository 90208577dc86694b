"""runtime_probe.formats."""
