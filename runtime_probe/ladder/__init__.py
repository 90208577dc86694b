"""runtime_probe.ladder."""
