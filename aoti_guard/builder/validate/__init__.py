"""Build-time validation: golden samples (``golden``), eager/float64 references (``references``), the
compiled package run in a child (``run``), and the optional ONNX Runtime second opinion
(``onnx_reference``, ``verdict``).
"""
