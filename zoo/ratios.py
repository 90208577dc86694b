"""Build / bare per model, and where the build's extra seconds go (docs/zoo.md, "Build / bare,
measured fairly").

``python -m zoo.ratios RUN.json [RUN.json ...]`` prints a markdown table from the saved runs of a
``--same-call`` series (``zoo.parity``): one row per model whose bare path and build both
finished in the same call, with

- ``bare``: the bare child's export + compile, and its whole process up to a package on disk
  (interpreter, imports, the factory, export, compile: ``parity.bare_process_s``);
- ``build``: the whole ``aoti-guard build`` command;
- the two ratios, build / bare process (the comparison a user makes: their own script against
  the command) and build / bare export + compile (the strict one, which charges the build for
  the interpreter and the imports the bare figure leaves out);
- the build's extra seconds over the bare process, by phase: start-up (the interpreter, imports
  and building the model: the build's time outside its export, compile, validation, twin and
  packaging, against the bare process's outside export and compile), export, compile (the
  release compile beside the twin's child against the bare compile alone), validate, the twin's
  phase (its wait and check), package.

The medians are over the rows; a later run's row for a model replaces an earlier one's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from zoo.parity import bare_process_s

__all__ = ["extra_seconds", "main", "markdown", "rows"]

# The build's phases that the bare path has a counterpart for, and those it has none for.
_SHARED = ("export", "compile")
_OWN = ("validate", "debug_twin", "package")


def _phase_s(build: Mapping[str, Any], name: str) -> float:
    seconds = ((build.get("phases") or {}).get(name) or {}).get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) else 0.0


def extra_seconds(bare: Mapping[str, Any], build: Mapping[str, Any]) -> dict[str, float] | None:
    """The build's seconds over the bare process, by part; they add up to build - bare process.
    None when the bare run did not record its parts."""
    process = bare_process_s(dict(bare))
    if process is None or not build.get("seconds") or bare.get("export_s") is None or bare.get("compile_s") is None:
        return None
    build_s = float(build["seconds"])
    bare_startup = process - float(bare["export_s"]) - float(bare["compile_s"])
    build_startup = build_s - sum(_phase_s(build, p) for p in (*_SHARED, *_OWN))
    out = {
        "startup": build_startup - bare_startup,
        "export": _phase_s(build, "export") - float(bare["export_s"]),
        "compile": _phase_s(build, "compile") - float(bare["compile_s"]),
    }
    out.update({p: _phase_s(build, p) for p in _OWN})
    return {k: round(v, 1) for k, v in out.items()}


def rows(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per model whose bare path and build both passed in the same run."""
    by_name: dict[str, dict[str, Any]] = {}
    for run in runs:
        for r in run.get("results", []):
            bare, build = r.get("bare") or {}, r.get("build") or {}
            if not (bare.get("ok") and build.get("ok") and bare.get("seconds") and build.get("seconds")):
                continue
            process = bare_process_s(bare)
            by_name[r["name"]] = {
                "name": r["name"],
                "jobs": run.get("jobs"),
                "paired": bool(run.get("paired")),
                "started": run.get("started"),
                "bare_s": float(bare["seconds"]),
                "process_s": process,
                "build_s": float(build["seconds"]),
                "ratio": round(float(build["seconds"]) / float(bare["seconds"]), 2),
                "ratio_process": round(float(build["seconds"]) / process, 2) if process else None,
                "extra": extra_seconds(bare, build),
            }
    return list(by_name.values())


def _beside(row: Mapping[str, Any]) -> str:
    """How the call ran it: ``8 at a time`` (bare path and build one after the other in a lane),
    ``4 paired`` (``--paired``: its bare path and build side by side, 4 models = 8 processes)."""
    jobs = row.get("jobs")
    if not isinstance(jobs, int):
        return "-"
    return f"{max(1, jobs // 2)} paired" if row.get("paired") else f"{jobs} at a time"


def _median(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})" if values else "-"


def markdown(runs: Sequence[Mapping[str, Any]]) -> str:
    table = rows(runs)
    parts = ("startup", "export", "compile", "validate", "debug_twin", "package")
    lines = [
        "| model | bare export + compile (s) | bare process (s) | build (s) | build / bare process | build / bare export + compile | "
        + " | ".join(f"+{p} (s)" for p in parts)
        + " | beside |",
        "| --- | ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in parts) + " | --- |",
    ]
    for row in sorted(table, key=lambda x: x["ratio_process"] or x["ratio"]):
        extra = row["extra"] or {}
        process = f"{row['process_s']:.1f}" if row["process_s"] else "-"
        ratio_process = f"{row['ratio_process']:.2f}" if row["ratio_process"] else "-"
        lines.append(
            f"| {row['name']} | {row['bare_s']:.1f} | {process} | {row['build_s']:.1f} | {ratio_process} | {row['ratio']:.2f} | "
            + " | ".join(f"{extra[p]:+.1f}" if p in extra else "-" for p in parts)
            + f" | {_beside(row)} |"
        )
    processes = [r["ratio_process"] for r in table if r["ratio_process"]]
    stricts = [r["ratio"] for r in table]
    lines += [
        "",
        f"Build / bare process, median over {len(processes)} models: **{_median(processes)}**.",
        f"Build / bare export + compile, median over {len(stricts)} models: {_median(stricts)}.",
    ]
    extras = [r["extra"] for r in table if r["extra"]]
    if extras:
        medians = ", ".join(f"{p} {statistics.median(e[p] for e in extras):+.1f} s" for p in parts)
        lines.append(f"The build's extra seconds over the bare process, median per part over {len(extras)} models: {medians}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.ratios", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="RUN.json", help="saved zoo.parity runs (--json), in order")
    ns = parser.parse_args(argv)
    runs = []
    for path in ns.runs:
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as exc:
            parser.error(f"cannot read {path}: {exc}")
    print(markdown(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
