"""Child isolation: anything that can crash the interpreter (dlopen of a .so, a kernel launch,
load_constants) runs in a fresh child interpreter. ``worker`` is the parent side (``Worker``, pipes,
timeouts, signals), ``main`` the child's request loop, ``ops`` what the child does (may import torch).
"""
