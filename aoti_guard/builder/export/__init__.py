"""The export step: the eager run, torch.export, its refusals turned into fixes, and what is read off the exported program (contract, guards, ranges, determinism, user samples)."""
