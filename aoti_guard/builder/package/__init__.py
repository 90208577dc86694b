"""The package step: the manifest, golden samples and twin appended to the compiled package."""
