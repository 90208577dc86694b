"""One verdict per node class, from many nodes' verdicts; and its three renderings (text, JSON, Markdown).

The JSON form is a contract with its own ``schema_version`` (MAJOR.MINOR): bump MINOR when adding a
field readers may ignore, MAJOR when removing or changing the meaning of one.

Rules (docs/fleet.md says why):

- A report is believed only as far as ``trust.believe`` says: in its own node's file, with a time
  that is a date and not in the future (a report that names another node, or whose time cannot be
  believed, has no verdict and supersedes nothing).
- A node's latest report counts (a retried pod or requeued task reports again); older ones are
  counted as ``superseded``. Two reports of one time: the failing one counts.
- A class fails when any of its nodes failed: nodes of one class run the same package the same
  way, so one failure is either the package (every node fails) or a sick node (the split says
  which), and either way the class is not cleared.
- A class passes when none failed and at least one passed; its nodes without a verdict are listed.
- A class whose nodes all gave no verdict has no verdict; so do reports that name no class
  (unreadable, corrupt, the probe died before reading the host): we cannot say which class they
  would have cleared.
- Exit code (NVIDIA's health-check convention): 1 if any class failed, else 2 if anything gave no
  verdict, else 0.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aoti_guard.fleet.classes import FAIL, NO_VERDICT, PASS, Issue, NodeClass, NodeResult
from aoti_guard.fleet.trust import believe
from runtime_probe.reporting.escaping import for_markdown
from runtime_probe.reporting.report import clean

__all__ = ["FLEET_SCHEMA_VERSION", "ClassVerdict", "FleetReport", "aggregate", "render_json", "render_markdown", "render_text"]

FLEET_SCHEMA_VERSION = "1.0"
_SHOWN_NODES = 10  # node names listed per line of the text and Markdown renderings


@dataclass(frozen=True)
class ClassVerdict:
    """One node class: its verdict, its nodes by outcome, and the findings of the failing ones."""

    node_class: NodeClass | None  # None: the reports that name no class
    verdict: str
    passed: tuple[str, ...]
    failed: tuple[str, ...]
    no_verdict: tuple[tuple[str, str], ...]  # (node or file, why)
    issues: tuple[tuple[Issue, tuple[str, ...]], ...]  # each error code (its first finding) and the nodes that had it

    @property
    def label(self) -> str:
        return self.node_class.label if self.node_class else "unclassified (the report names no host facts)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.node_class.to_dict() if self.node_class else None,
            "label": self.label,
            "verdict": self.verdict,
            "nodes": {
                "pass": list(self.passed),
                "fail": list(self.failed),
                "no_verdict": [{"node": n, "reason": r} for n, r in self.no_verdict],
            },
            "issues": [{**issue.to_dict(), "nodes": list(nodes)} for issue, nodes in self.issues],
        }


@dataclass(frozen=True)
class FleetReport:
    classes: tuple[ClassVerdict, ...]
    reports: int
    superseded: int

    @property
    def exit_code(self) -> int:
        if any(c.verdict == FAIL for c in self.classes):
            return 1
        return 2 if any(c.verdict == NO_VERDICT for c in self.classes) or not self.classes else 0

    def count(self, verdict: str) -> int:
        return sum(1 for c in self.classes if c.verdict == verdict)

    def to_dict(self) -> dict[str, Any]:
        nodes = {
            PASS: sum(len(c.passed) for c in self.classes),
            FAIL: sum(len(c.failed) for c in self.classes),
            NO_VERDICT: sum(len(c.no_verdict) for c in self.classes),
        }
        return {
            "schema_version": FLEET_SCHEMA_VERSION,
            "kind": "fleet",
            "exit_code": self.exit_code,
            "verdict": {0: PASS, 1: FAIL}.get(self.exit_code, NO_VERDICT),
            "reports": self.reports,
            "superseded": self.superseded,
            "counts": {"classes": {v: self.count(v) for v in (PASS, FAIL, NO_VERDICT)}, "nodes": nodes},
            "classes": [c.to_dict() for c in self.classes],
        }


_RANK = {PASS: 0, NO_VERDICT: 1, FAIL: 2}  # of two reports of one time, the worse counts


def _latest(results: Iterable[NodeResult], now: _dt.datetime) -> tuple[list[NodeResult], int]:
    """One result per named node: its latest believed report (by ``created``; ties: the worse
    outcome, then the later file); every result as ``trust.believe`` takes it."""
    keep: dict[str, tuple[tuple[_dt.datetime, int], NodeResult]] = {}
    anonymous: list[NodeResult] = []
    superseded = 0
    for given in results:
        r, at = believe(given, now)
        if r.node == "?" or r.node_class is None:
            anonymous.append(r)  # no name (or not its own file) or no class: nothing to dedupe it by
            continue
        key = (at, _RANK[r.outcome])
        old = keep.get(r.node)
        if old is not None:
            superseded += 1
            if old[0] > key:
                continue
        keep[r.node] = (key, r)
    return [r for _, r in keep.values()] + anonymous, superseded


def _class_verdict(cls: NodeClass | None, members: Sequence[NodeResult]) -> ClassVerdict:
    def name(r: NodeResult) -> str:
        return r.node if r.node != "?" else r.source

    passed = tuple(sorted(name(r) for r in members if r.outcome == PASS))
    failed = tuple(sorted(name(r) for r in members if r.outcome == FAIL))
    silent = tuple(sorted((name(r), r.reason) for r in members if r.outcome == NO_VERDICT))
    # grouped by code: a message may name the node's own facts; the first node's words stand for all
    by_code: dict[str, tuple[Issue, set[str]]] = {}
    for r in sorted(members, key=name):
        if r.outcome == FAIL:
            for issue in r.issues:
                by_code.setdefault(issue.code, (issue, set()))[1].add(name(r))
    issues = tuple(sorted(((i, tuple(sorted(n))) for i, n in by_code.values()), key=lambda t: (-len(t[1]), t[0].code)))
    verdict = FAIL if failed else PASS if passed and cls is not None else NO_VERDICT
    return ClassVerdict(cls, verdict, passed, failed, silent, issues)


def aggregate(results: Iterable[NodeResult], now: _dt.datetime | None = None) -> FleetReport:
    """The fleet's verdict per class (the module's docstring gives the rules); ``now`` (this
    machine's clock by default) bounds the reports' times."""
    items = list(results)
    latest, superseded = _latest(items, now or _dt.datetime.now(_dt.UTC))
    groups: dict[NodeClass | None, list[NodeResult]] = {}
    for r in latest:
        groups.setdefault(r.node_class, []).append(r)
    order = {FAIL: 0, NO_VERDICT: 1, PASS: 2}
    verdicts = [_class_verdict(cls, members) for cls, members in groups.items()]
    verdicts.sort(key=lambda c: (order[c.verdict], c.node_class is None, c.label))
    return FleetReport(tuple(verdicts), reports=len(items), superseded=superseded)


def _names(nodes: Sequence[str], escape: Callable[[object], str] = clean) -> str:
    """At most ``_SHOWN_NODES`` names, each through the medium's ``escape``."""
    shown = ", ".join(escape(n) for n in nodes[:_SHOWN_NODES])
    return shown + (f" and {len(nodes) - _SHOWN_NODES} more" if len(nodes) > _SHOWN_NODES else "")


def _issue_line(issue: Issue) -> str:
    line = f"{issue.code}: {issue.message}"
    if issue.expected is not None or issue.found is not None:
        exp = (issue.expected or "-").splitlines()[0] if issue.expected else "-"
        found = (issue.found or "-").splitlines()[0] if issue.found else "-"
        line += f" (expected {exp}, found {found})"
    return line


_MARK = {PASS: "PASS", FAIL: "FAIL", NO_VERDICT: "NO VERDICT"}


def render_text(report: FleetReport) -> str:
    """The human rendering: one block per class (failing first), then the fleet's verdict."""
    lines: list[str] = []
    for c in report.classes:
        total = len(c.passed) + len(c.failed) + len(c.no_verdict)
        lines.append(
            f"{_MARK[c.verdict]:<10} {clean(c.label)}  ({total} node(s): {len(c.passed)} pass, {len(c.failed)} fail, {len(c.no_verdict)} no verdict)"
        )
        if c.failed:
            lines.append(f"    failed on: {_names(c.failed)}")
            if c.passed:
                lines.append(
                    f"    split: {len(c.failed)} of {total} failed in one class: suspect those nodes (hardware, driver state) as well as the package"
                )
        for issue, nodes in c.issues:
            lines.append(f"    ERROR {clean(_issue_line(issue))}  [{len(nodes)} node(s)]")
            if issue.hint:
                lines.append(f"          hint: {clean(issue.hint)}")
        for node, why in c.no_verdict[:_SHOWN_NODES]:
            lines.append(f"    no verdict from {clean(node)}: {clean(why)}")
        if len(c.no_verdict) > _SHOWN_NODES:
            lines.append(f"    ... and {len(c.no_verdict) - _SHOWN_NODES} more without a verdict (--json lists all)")
    lines.append(_footer(report))
    return "\n".join(lines) + "\n"


def _footer(report: FleetReport) -> str:
    verdict = {0: "PASSED", 1: "FAILED"}.get(report.exit_code, "NO VERDICT")
    extra = f", {report.superseded} superseded by the latest believed report of the same node" if report.superseded else ""
    return (
        f"{verdict}: {report.count(PASS)} class(es) pass, {report.count(FAIL)} fail, {report.count(NO_VERDICT)} without a verdict "
        f"({report.reports} report(s){extra})"
    )


def render_json(report: FleetReport) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def render_markdown(report: FleetReport) -> str:
    """A summary for a pull request or a CI page: a table of classes, then each failure's findings.
    Every text from a node's report goes through ``for_markdown``: it adds no link, image,
    emphasis, HTML, row, cell, mention or issue reference to the page."""
    md = for_markdown
    head = {0: "passed", 1: "FAILED"}.get(report.exit_code, "NO VERDICT")
    lines = [f"### Fleet probe: {head}", "", "| verdict | node class | pass | fail | no verdict |", "|---|---|---:|---:|---:|"]
    lines += [f"| {_MARK[c.verdict]} | {md(c.label)} | {len(c.passed)} | {len(c.failed)} | {len(c.no_verdict)} |" for c in report.classes]
    for c in report.classes:
        if c.verdict == PASS and not c.no_verdict:
            continue
        lines += ["", f"#### {_MARK[c.verdict]}: {md(c.label)}", ""]
        for issue, nodes in c.issues:
            hint = f" Hint: {md(issue.hint)}" if issue.hint else ""
            lines.append(f"- **{md(issue.code)}** on {len(nodes)} node(s) ({_names(nodes, md)}): {md(_issue_line(issue))}.{hint}")
        for node, why in c.no_verdict[:_SHOWN_NODES]:
            lines.append(f"- no verdict from {md(node)}: {md(why)}")
    lines += ["", md(_footer(report))]
    return "\n".join(lines) + "\n"
