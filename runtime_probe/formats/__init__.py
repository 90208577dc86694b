"""Readers of binary and text formats, standard library only: safetensors, ELF, the zip layout,
AOTI's generated wrapper.cpp, size expressions over symbols, and strict JSON <-> dataclass conversion.
"""
