"""What a build reads and writes, for the one path rule (runtime_probe/reporting/paths.py).

Reads: the TARGET's file (a factory's ``file.py``, a saved program), ``--samples`` and ``--key`` (``--sign-key``). Writes, in
the order a build writes them: ``-o``, ``OUT.rejected.pt2`` (a build that fails validation is kept
there), ``OUT.minify/`` (``--minify``), ``--keep-onnx``, ``--trace-dir``'s trace files, then the
reports and the log. Light to import: the command line's error path uses it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from aoti_guard.builder.minify.driver import minify_dir
from runtime_probe.reporting.paths import Paths, Read, Write, report_writes

__all__ = ["build_paths", "rejected_path", "target_file"]


def rejected_path(output: str) -> str:
    """Where a build that failed validation keeps its package: ``OUT.rejected.pt2``."""
    return os.path.splitext(output)[0] + ".rejected.pt2"


def target_file(target: Any) -> str | None:
    """The file a TARGET names (``file.py`` of ``file.py:func``, or a saved program), if any."""
    if not isinstance(target, str) or not target:
        return None
    if os.path.exists(target):
        return target
    module_part, sep, _ = target.rpartition(":")
    if sep and module_part and (module_part.endswith(".py") or os.path.exists(module_part)):
        return module_part
    return None


def build_paths(target: Any, values: Mapping[str, Any], *, reports: bool = True) -> Paths:
    """A build's reads and writes. ``values``: the build's flag values by dest name (``output``,
    ``sign_key``, ``samples``, ``minify``, ``keep_onnx``, ``trace_dir``, ``json``, ``junit``, ``log_file``)."""
    reads = [Read(what, p) for what, p in (("the build target", target_file(target)), ("the signing key", values.get("sign_key"))) if p]
    reads += [Read("the --samples file", os.fspath(p)) for p in values.get("samples") or () if isinstance(p, (str, os.PathLike))]
    writes: list[Write] = []
    output = values.get("output")
    if output:
        writes += [Write("-o", output), Write("-o (its rejected build)", rejected_path(output))]
        if values.get("minify"):
            writes.append(Write("--minify", minify_dir(output), "*"))
    if values.get("keep_onnx"):
        writes.append(Write("--keep-onnx", values["keep_onnx"]))
    if values.get("trace_dir"):
        writes.append(Write("--trace-dir", values["trace_dir"], "dedicated_log_torch_trace_*"))
    if reports:
        writes += report_writes(values)
    return Paths(tuple(reads), tuple(writes))
