"""runtime_probe.package."""
