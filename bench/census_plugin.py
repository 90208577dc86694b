"""pytest plugin of a census run (bench/lane_census.py loads it with ``-p bench.census_plugin``):
each test's wall seconds and the CPU seconds of its worker and of the processes it reaped (children
and their waited-for descendants) while the test ran (setup and teardown included), one JSON line
per test in ``$AOTI_GUARD_CENSUS_DIR/tests.jsonl``. Under pytest-xdist each worker reaps only its
own children, so a shared package is counted once, in the test whose worker built it."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from typing import Any

import pytest


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    out = os.environ.get("AOTI_GUARD_CENSUS_DIR")
    started = time.time()
    own0, reaped0 = _cpu()
    yield
    own1, reaped1 = _cpu()
    if out:
        record = {
            "test": item.nodeid,
            "wall": time.time() - started,
            "self": own1 - own0,
            "children": reaped1 - reaped0,
        }
        with open(os.path.join(out, "tests.jsonl"), "a") as fh:
            fh.write(json.dumps(record) + "\n")
