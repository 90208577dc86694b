"""Validate a JSON output against the schema the package ships (runtime_probe/schemas)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime_probe import schemas


def validate(name: str, data: Any) -> None:
    """Fail the test with every schema error of ``data`` (one of schemas.NAMES)."""
    jsonschema = pytest.importorskip("jsonschema")  # pinned in the test extra (constraints.txt)
    validator = jsonschema.Draft202012Validator(schemas.load(name))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:20])
