"""What the probe runs on: torch's version differences, the compiled model's call, tensor comparison, latency statistics, the .pt2's internal layout and signal handling."""
