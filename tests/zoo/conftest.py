"""The zoo's CI subset: the model libraries (the ``zoo`` extra) must be installed.

Under CI (``CI`` set to a true value, as `.ci/run` runs) or with ``AOTI_GUARD_REQUIRE_ZOO=1`` a
missing library FAILS these tests; elsewhere they skip with the reason and the install command.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

FIX = "pip install -c constraints.txt -e '.[zoo]'"


def _required() -> bool:
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return ci or os.environ.get("AOTI_GUARD_REQUIRE_ZOO") == "1"


def require_zoo_libraries() -> None:
    missing = [lib for lib in ("transformers", "timm", "torchvision") if importlib.util.find_spec(lib) is None]
    if not missing:
        return
    reason = f"the zoo needs {', '.join(missing)}, not installed"
    if _required():
        pytest.fail(f"{reason} (CI installs the zoo extra: {FIX})", pytrace=False)
    pytest.skip(f"{reason}; {FIX}")
