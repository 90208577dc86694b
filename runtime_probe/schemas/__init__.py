"""JSON Schemas of the tool's JSON outputs, shipped as package data (docs/reports.md explains them).

``load(name)`` returns one as a dict: "probe-report", "build-report", "inspect" or "diff".
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["NAMES", "load"]

NAMES = ("probe-report", "build-report", "inspect", "diff")


def load(name: str) -> dict[str, Any]:
    """The JSON Schema ``name`` (one of NAMES), read from the installed package."""
    if name not in NAMES:
        raise ValueError(f"no schema {name!r}; known: {', '.join(NAMES)}")
    data: dict[str, Any] = json.loads(resources.files(__package__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8"))
    return data
