"""Writing the one .pt2 (``writer``: entries, hashes, the twin beside the release model) and signing
its manifest (``signing``).
"""
