"""The guarded loader (``runtime_probe.load``): ``load`` opens and verifies the package and wraps the
compiled model; ``inputs`` compiles the manifest's I/O contract into per-call checks.
"""
