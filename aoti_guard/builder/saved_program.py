"""The ExportedProgram saved once per build (``torch.export.save``), for the helper processes that
need it: the ONNX Runtime reference and the AOTI minifier."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["save_program"]


def save_program(ep: Any, work: str) -> tuple[str | None, str | None]:
    """``(path, None)``, or ``(None, why)`` when the program cannot be serialized."""
    import torch

    path = os.path.join(work, "program.pt2")
    if os.path.exists(path):
        return path, None
    try:
        torch.export.save(ep, path)
    except Exception as exc:  # noqa: BLE001 - a program torch cannot serialize (custom objects...)
        if os.path.exists(path):
            os.remove(path)
        return None, f"torch.export.save failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return path, None
