"""Where ``aoti-guard build`` spends its time beyond the bare path, per zoo model (issue 26).

The bare path's process (interpreter, imports, factory, export, compile: ``zoo.parity.bare_process_s``)
against the build's command, phase by phase, and each phase's share of the ratio:

    build / bare process = 1 + sum over parts of (part / bare process)

where the parts are the build's start-up and resolve less the bare path's start-up and factory,
its export and compile less the bare path's, and its debug_twin, validate and package phases
(none of which the bare path has).

    python -m bench.zoo_build_ratio resnet18 bert --size small          # run them now (zoo.parity, bare path included)
    python -m bench.zoo_build_ratio --from docs/zoo-runs/gpu-full-*.json  # the table from saved runs (later runs win)
    python -m bench.zoo_build_ratio --before A.json --after B.json        # two saved runs side by side

Prints a markdown table (docs/benchmarks.md, "Build / bare on the zoo").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

# by name; since 2026-11-25 debug_twin runs after validate and holds the twin's check (before: inside validate)
PHASES = ("resolve", "export", "compile", "debug_twin", "validate", "package")
PARTS = ("start-up", "export", "compile", "debug_twin", "validate", "package")


def breakdown(r: dict[str, Any]) -> dict[str, Any] | None:
    """One model's times (seconds) and each part's share of build / bare process; None unless both
    the bare path and the build passed and the bare run recorded its process time."""
    from zoo.parity import bare_process_s

    b, g = r.get("bare") or {}, r.get("build") or {}
    if not (b.get("ok") and g.get("ok") and g.get("phases") and g.get("seconds")):
        return None
    process = bare_process_s(b)
    if not process:
        return None
    ph = {k: float((g["phases"].get(k) or {}).get("seconds") or 0.0) for k in PHASES}
    other = float(g["seconds"]) - sum(ph.values())  # interpreter, imports, report writing, exit
    bare_start = process - float(b["export_s"]) - float(b["compile_s"])
    extra = {
        "start-up": other + ph["resolve"] - bare_start,
        "export": ph["export"] - float(b["export_s"]),
        "compile": ph["compile"] - float(b["compile_s"]),
        "debug_twin": ph["debug_twin"],
        "validate": ph["validate"],
        "package": ph["package"],
    }
    return {
        "name": r["name"],
        "bare": {"start-up": bare_start, "export": float(b["export_s"]), "compile": float(b["compile_s"]), "process": process},
        "build": {"start-up": other, **ph, "total": float(g["seconds"])},
        "ratio": float(g["seconds"]) / process,
        "share": {k: v / process for k, v in extra.items()},
    }


def latest(paths: Sequence[str]) -> list[dict[str, Any]]:
    """The results of saved runs, a later run's replacing an earlier one's where it has a breakdown
    (a ``--no-bare`` rerun keeps the earlier bare path, as zoo.parity's report does)."""
    from zoo.parity import merge_runs

    merged = merge_runs([json.load(open(p)) for p in paths])
    return list(merged["results"])


def table(rows: Sequence[dict[str, Any]]) -> str:
    head = "| model | bare: start-up + factory | export | compile | bare process | build: start-up | resolve | export | compile | debug_twin | validate | package | build | build / bare process |"
    lines = [head, "|" + " ---: |" * 15]
    lines[1] = "| --- |" + " ---: |" * 14
    for x in rows:
        b, g = x["bare"], x["build"]
        cells = [b["start-up"], b["export"], b["compile"], b["process"], g["start-up"], *(g[k] for k in PHASES), g["total"]]
        lines.append(f"| {x['name']} | " + " | ".join(f"{c:.1f}" for c in cells) + f" | {x['ratio']:.2f} |")
    if rows:
        lines.append("")
        lines.append("| part of build / bare process | median share | mean share | seconds (sum) |")
        lines.append("| --- | ---: | ---: | ---: |")
        for k in PARTS:
            shares = [x["share"][k] for x in rows]
            secs = sum(x["share"][k] * x["bare"]["process"] for x in rows)
            lines.append(f"| {k} | {statistics.median(shares):+.3f} | {statistics.mean(shares):+.3f} | {secs:.0f} |")
        ratios = [x["ratio"] for x in rows]
        total = sum(x["build"]["total"] for x in rows) / sum(x["bare"]["process"] for x in rows)
        lines.append("")
        lines.append(f"{len(rows)} models: build / bare process median {statistics.median(ratios):.2f}, over the whole run {total:.2f}")
    return "\n".join(lines)


def side_by_side(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> str:
    """Per model: each build phase and the ratio, before and after."""
    by = {x["name"]: x for x in after}
    lines = ["| model | " + " | ".join(f"{k} before / after" for k in ("start-up", *PHASES)) + " | build / bare before / after |"]
    lines.append("| --- |" + " ---: |" * (len(PHASES) + 2))
    for x in before:
        y = by.get(x["name"])
        if y is None:
            continue
        cells = [f"{x['build'][k]:.1f} / {y['build'][k]:.1f}" for k in ("start-up", *PHASES)]
        lines.append(f"| {x['name']} | " + " | ".join(cells) + f" | {x['ratio']:.2f} / {y['ratio']:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="zoo models to run now (zoo.parity, bare path included)")
    p.add_argument("--size", default="small")
    p.add_argument("--device", default="cpu")
    p.add_argument("--build-arg", action="append", default=[], help="passed to every build (repeat)")
    p.add_argument("--json", help="write the run's results here (zoo.parity's format)")
    p.add_argument("--from", dest="saved", nargs="+", help="saved zoo.parity runs (later ones win)")
    p.add_argument("--before", nargs="+", help="saved runs before a change")
    p.add_argument("--after", nargs="+", help="saved runs after it")
    ns = p.parse_args(argv)
    if ns.before and ns.after:
        before = [x for x in map(breakdown, latest(ns.before)) if x]
        after = [x for x in map(breakdown, latest(ns.after)) if x]
        print(side_by_side(before, after))
        print()
        print("before:\n" + table(before) + "\n\nafter:\n" + table(after))
        return 0
    if ns.saved:
        print(table([x for x in map(breakdown, latest(ns.saved)) if x]))
        return 0
    if not ns.names:
        p.error("name zoo models, or give --from / --before and --after")
    from zoo import parity

    with tempfile.TemporaryDirectory(prefix="bench-zoo-ratio-") as out:
        results = parity.run_parity(
            ns.names, size=ns.size, device=ns.device, out_dir=out, timeout=1800, build_args=ns.build_arg, keep_packages=False
        )
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"size": ns.size, "device": ns.device, "names": ns.names, "results": results}, f, indent=1)
    print(table([x for x in map(breakdown, results) if x]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
