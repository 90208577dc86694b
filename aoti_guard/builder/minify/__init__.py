"""``--minify``: PyTorch's AOTI minifier driven to a small repro after a compiler failure or a wrong package."""
