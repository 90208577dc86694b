"""Two zoo runs of the same models side by side: the debug twin's schedule A/B.

``python -m zoo.ab A.json B.json`` prints a markdown table, per model: the bare time (from run A,
which ran the bare path), each run's build time and twin phase, and each build's ratio to that
bare time, the same ratios as docs/zoo.md's table (build / bare export + compile, and build / the
bare script's whole process). Run B may skip the bare path (``--no-bare``): both runs are divided
by run A's bare times, measured at the same number of models at a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from zoo.parity import judge


def _twin_s(build: dict[str, Any]) -> float | None:
    seconds = ((build.get("phases") or {}).get("debug_twin") or {}).get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) else None


def _label(run: dict[str, Any]) -> str:
    args = run.get("build_args") or []
    return " ".join(args) or "default"


def rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per model both runs built: seconds and ratios; None where a run did not finish it.
    Run B's builds are judged against run A's bare path (``parity.judge``, as ``--report`` does)."""
    by_name_b = {r["name"]: r for r in b.get("results", [])}
    out = []
    for ra in a.get("results", []):
        rb = by_name_b.get(ra["name"])
        bare = ra.get("bare") or {}
        row: dict[str, Any] = {"name": ra["name"], "bare_s": bare.get("seconds") if bare.get("ok") else None}
        judged_b = judge({**rb, "build": dict(rb["build"]), "bare": ra.get("bare")}) if rb is not None else None
        for key, r in (("a", judge({**ra, "build": dict(ra["build"])})), ("b", judged_b)):
            g = (r or {}).get("build") or {}
            ok = bool(g.get("ok"))
            row[f"{key}_s"] = g.get("seconds") if ok else None
            row[f"{key}_twin_s"] = _twin_s(g) if ok else None
            row[f"{key}_ratio"] = g.get("ratio")
            row[f"{key}_process"] = g.get("ratio_process")
        out.append(row)
    return out


def _f(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def markdown(a: dict[str, Any], b: dict[str, Any]) -> str:
    la, lb = _label(a), _label(b)
    table = rows(a, b)
    lines = [
        f"A: `{la}`; B: `{lb}`; {a.get('jobs')} model(s) at a time in A, {b.get('jobs')} in B.",
        "",
        "| model | bare (s) | build A (s) | twin A (s) | ratio A | process A | build B (s) | twin B (s) | ratio B | process B |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in table:
        lines.append(
            f"| {r['name']} | {_f(r['bare_s'])} | {_f(r['a_s'])} | {_f(r['a_twin_s'])} | {_f(r['a_ratio'], '.2f')} | "
            f"{_f(r['a_process'], '.2f')} | {_f(r['b_s'])} | {_f(r['b_twin_s'])} | {_f(r['b_ratio'], '.2f')} | {_f(r['b_process'], '.2f')} |"
        )
    for key, label in (("a", la), ("b", lb)):
        ratios = [r[f"{key}_ratio"] for r in table if r[f"{key}_ratio"] is not None]
        process = [r[f"{key}_process"] for r in table if r[f"{key}_process"] is not None]
        if ratios:
            lines.append(
                f"\n`{label}`: build / bare median {statistics.median(ratios):.2f} over {len(ratios)} model(s)"
                + (f"; build / the bare script's whole process median {statistics.median(process):.2f}" if process else "")
                + "."
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.ab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the run with the bare path (zoo.parity --json)")
    parser.add_argument("b", help="the other run (may be --no-bare)")
    ns = parser.parse_args(argv)
    runs = []
    for path in (ns.a, ns.b):
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as exc:
            parser.error(f"cannot read {path}: {exc}")
    print(markdown(runs[0], runs[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
