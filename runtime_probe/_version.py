"""The version of aoti-guard and runtime_probe, a leaf: modules read it without importing the package API."""

__version__ = "0.1.0"
