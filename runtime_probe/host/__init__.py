"""runtime_probe.host."""
