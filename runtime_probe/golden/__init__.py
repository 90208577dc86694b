"""Golden samples at any size: the input generator the build and the probe share (recipe.py) and
the compact form of a reference output too large to store (compact.py)."""
