"""The load phase's evidence from the model .so itself: its ``[AOTI_LOAD]`` lines.

A model .so compiled by torch 2.14 or later carries ``AOTI_LOG_LOADING`` (a macro of
``aoti_runtime/model_base.h``): with ``AOTI_LOG_LOADING=1`` in its environment it prints
``[AOTI_LOAD] load_constants: starting H2D copy of N constants`` and ``... completed in N ms``
to stderr when it loads its own constants, and on CUDA the staging pool's choices. A .so built
without its weights (``package_constants_in_so=False``) returns before that line: it prints
nothing. So for a .so that can log (``torch_compat.so_features``: the build's torch, not the
host's), the log says whether it loaded constants of its own. That is stated, where before 2.14
it can only be inferred (the manifest's config, the wrapper.cpp's ``include_weights=false``).

``AOTInductorModelContainerDidCallLoadConstants`` (2.14) does not say it: measured on 2.15, it
is True for a weightless .so too (the flag is set before the early return), so it is not used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime_probe.runtime.torch_compat import aoti_load_lines

__all__ = ["ENV", "LoadLog", "read_load_log"]

ENV = {"AOTI_LOG_LOADING": "1"}  # set in the probe's child: the .so reads it when it first logs
_STARTED = re.compile(r"load_constants: starting \S+ copy of (\d+) constants")


@dataclass(frozen=True)
class LoadLog:
    """What the model .so said while it loaded."""

    lines: tuple[str, ...]
    can_log: bool | None  # the .so carries the [AOTI_LOAD] log (None: its .so could not be read)
    logging: bool  # AOTI_LOG_LOADING was set in the child that loaded it
    constants: int | None  # N of "starting ... copy of N constants"; None when it printed none

    @property
    def loaded_none(self) -> bool:
        """The .so could log, was asked to, and loaded no constants of its own (no weights)."""
        return bool(self.can_log) and self.logging and self.constants is None

    def to_detail(self) -> dict[str, Any]:
        return {"lines": list(self.lines), "so_logs_loading": self.can_log, "constants_loaded_by_so": self.constants}


def read_load_log(stderr: str, so_features: Mapping[str, bool] | None, child_env: Mapping[str, str]) -> LoadLog:
    """The load's ``[AOTI_LOAD]`` lines (``stderr``: the child's output during the load),
    with whether the .so could print them and whether the child asked it to."""
    lines = tuple(aoti_load_lines(stderr))
    counts = [int(m.group(1)) for line in lines if (m := _STARTED.search(line))]
    return LoadLog(
        lines=lines[:50],
        can_log=None if so_features is None else bool(so_features.get("load_log")),
        logging=child_env.get("AOTI_LOG_LOADING") not in (None, "", "0"),
        constants=counts[0] if counts else None,
    )
