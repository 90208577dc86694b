"""runtime_probe.child."""
