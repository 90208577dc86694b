"""runtime_probe.trust."""
