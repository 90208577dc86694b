"""Trust: the Ed25519 signature over the manifest (``signature``, ``ed25519``) and the order in which
an archive is trusted (``check``: signature, then manifest, then every entry's hash).
"""
