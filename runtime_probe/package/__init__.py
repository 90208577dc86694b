"""What a .pt2 holds and how it is read safely: the archive (safe zip, hashes), the manifest and its
rules, the debug twin, and external weights checked before ``load_constants``.
"""
