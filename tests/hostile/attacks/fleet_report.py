"""Attacks: fleet_report (issue 40). See tests/hostile/attack.py.

Every attack runs the real command line in a subprocess (``aoti-guard fleet report``, ``python -m
runtime_probe``) on a folder of node reports it wrote, and reads what came out: the exit code, the
JSON verdict, the Markdown rendered as GitHub renders it (tests/gfm.py)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from runtime_probe.reporting.findings import error
from runtime_probe.reporting.report import Report, make_phase
from tests.gfm import markup_added, references, render
from tests.hostile.attack import Attack, AttackContext, AttackSucceeded
from tests.hostile.make_corpus import rewrite

_TIMEOUT_S = 60  # fleet report on a handful of files takes about a second; a probe --verify-only about two
_H100 = {"name": "NVIDIA H100 80GB HBM3", "capability": "90", "total_memory": 85_000_000_000}
# one of each way text becomes markup on a GitHub page: link, image, emphasis, HTML, autolinks,
# a mention, issue references, a table cell and row
_HOSTILE = (
    "@octocat [click](https://evil.example/x) ![p](https://evil.example/p.png) **bold** _em_ ~~del~~ "
    "<img src=x onerror=alert(1)> www.evil.example user@evil.example #12 GH-3 | cell |\n| row | row |"
)


def _ago(minutes: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes)).isoformat(timespec="seconds")


def _node_report(
    node: str, *, fail: bool = False, created: str | None = None, sha256: str | None = "ab" * 32, text: str | None = None
) -> dict[str, Any]:
    """A probe report as node_check writes it: a GPU node's host facts, pass or one error finding."""
    findings = [error("env.arch_mismatch", "host", text or "no kernel for sm_90", expected="sm_90", found=text, hint=text)] if fail else []
    host = {
        "hostname": node,
        "machine": "x86_64",
        "torch": "2.11.0+cu130",
        "libstdcxx": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.33",
        "devices": [{**_H100, "name": text or _H100["name"]}],
        "driver": {"version": "580.95.05", "cuda_version": "13.0"},
    }
    package = {"path": "/models/model.pt2", **({"sha256": sha256} if sha256 else {})}
    report = Report(kind="probe", package=package, phases=(make_phase("host", 0.1, findings),), host=host, extra={"device": "cuda"})
    doc = report.to_dict()
    doc["created"] = _ago(60) if created is None else created
    doc["extra"]["fleet"] = {"node": node}
    return doc


def _write(folder: Path, name: str, doc: object) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))


def _fleet(ctx: AttackContext, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any] | None, str]:
    """``aoti-guard fleet report ARGS --json J``: (exit code, the JSON verdict or None, stderr)."""
    out = ctx.tmp / "fleet.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "aoti_guard", "fleet", "report", *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        env={**os.environ, **(env or {})},
    )
    if "Traceback" in proc.stderr or "this is a bug in aoti-guard" in proc.stderr:
        raise AttackSucceeded(f"fleet report crashed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    return proc.returncode, json.loads(out.read_text()) if out.exists() else None, proc.stderr


def _nodes(verdict: dict[str, Any], outcome: str) -> list[str]:
    return [n if outcome != "no_verdict" else n["node"] for c in verdict["classes"] for n in c["nodes"][outcome]]


def _node_claims_another(ctx: AttackContext) -> str:
    reports = ctx.tmp / "reports"
    _write(reports, "gpu01.json", _node_report("gpu01", fail=True))
    _write(reports, "gpu02.json", _node_report("gpu01", created="9999-12-31T23:59:59+00:00"))  # gpu02 speaks for gpu01
    code, verdict, err = _fleet(ctx, str(reports))
    if code != 1 or verdict is None or _nodes(verdict, "fail") != ["gpu01"]:
        raise AttackSucceeded(f"gpu02's report hid gpu01's failure: exit {code}, {verdict and verdict['verdict']} {err[-200:]}")
    return f"exit 1: gpu01 still fails; {Path(_nodes(verdict, 'no_verdict')[0]).name} (naming gpu01) has no verdict"


def _created_beyond_belief(created: str) -> Any:
    def run(ctx: AttackContext) -> str:
        reports = ctx.tmp / "reports"
        _write(reports, "gpu01.json", _node_report("gpu01", fail=True))
        _write(reports, "gpu01--retry.json", _node_report("gpu01", created=created))  # a later "pass" of the same node
        code, verdict, err = _fleet(ctx, str(reports))
        if code != 1 or verdict is None or _nodes(verdict, "fail") != ["gpu01"]:
            raise AttackSucceeded(f"a report created {created!r} superseded gpu01's failure: exit {code} {err[-200:]}")
        return f"exit 1: gpu01 fails; its report created {created!r} did not supersede the failure"

    return run


def _no_digest(ctx: AttackContext) -> str:
    reports = ctx.tmp / "reports"
    _write(reports, "gpu01.json", _node_report("gpu01"))
    _write(reports, "gpu02.json", _node_report("gpu02", sha256=None))  # which package did it probe?
    code, verdict, err = _fleet(ctx, str(reports))
    if code != 2 or verdict is not None or "gpu02.json" not in err:
        raise AttackSucceeded(f"a report without a package digest counted as the same package: exit {code}, {err.strip()[-200:]}")
    return "exit 2: refused, naming gpu02.json as a package of its own (--any-package groups it)"


def _huge_number(ctx: AttackContext) -> str:
    reports = ctx.tmp / "reports"
    _write(reports, "gpu01.json", _node_report("gpu01", fail=True))
    text = json.dumps(_node_report("gpu02")).replace('"seconds": 0.1', '"seconds": ' + "9" * 401)
    (reports / "gpu02.json").write_text(text)
    code, verdict, err = _fleet(ctx, str(reports))
    if code != 1 or verdict is None:
        raise AttackSucceeded(f"one node's 401-digit number decided the fleet's exit: {code} {err.strip()[-200:]}")
    silent = _nodes(verdict, "no_verdict")
    if len(silent) != 1 or not (silent[0] == "gpu02" or silent[0].endswith("gpu02.json")):
        raise AttackSucceeded(f"the report with the 401-digit number was not gpu02's no verdict: {silent}")
    return "exit 1 (gpu01's failure); gpu02's report: no verdict"


def _symlinked_folder(ctx: AttackContext) -> str:
    real = ctx.tmp / "mnt" / "reports"
    _write(real, "gpu01.json", _node_report("gpu01"))
    link = ctx.tmp / "reports"
    os.symlink(real, link)
    code, verdict, err = _fleet(ctx, str(link))
    if code != 0 or verdict is None or _nodes(verdict, "pass") != ["gpu01"]:
        raise AttackSucceeded(f"the reports folder given through a symlink was refused: exit {code} {err.strip()[-200:]}")
    return "exit 0: the folder the symlink names was read"


def _fleet_markdown(ctx: AttackContext, text: str, run: str) -> tuple[str, str]:
    """The fleet's Markdown (--markdown and $GITHUB_STEP_SUMMARY) with ``text`` in every node-given field."""
    reports = ctx.tmp / run / "reports"
    _write(reports, "gpu01.json", _node_report("gpu01", fail=True, text=text))
    _write(reports, "gpu02.json", _node_report("gpu02", text=text))
    _write(reports, "gpu03.json", {"kind": "fleet.no_verdict", "node": "gpu03", "reason": text})
    md, summary = reports.parent / "fleet.md", reports.parent / "summary.md"
    code, _, err = _fleet(ctx, str(reports), "--markdown", str(md), env={"GITHUB_STEP_SUMMARY": str(summary)})
    if code != 1:
        raise AttackSucceeded(f"fleet report exited {code}, expected 1: {err.strip()[-200:]}")
    return md.read_text(), summary.read_text()


def _fleet_markdown_injection(ctx: AttackContext) -> str:
    hostile, summary = _fleet_markdown(ctx, _HOSTILE, "hostile")
    benign, _ = _fleet_markdown(ctx, "plain words", "benign")
    for name, page in (("--markdown", hostile), ("$GITHUB_STEP_SUMMARY", summary)):
        added, refs = markup_added(page, benign), references(render(page))
        if added or refs:
            raise AttackSucceeded(f"node text added markup to the fleet's {name} page: {added}, references {refs}")
    return "the fleet's Markdown and step summary render the node text as text: no element added, no mention or reference"


def _probe_markdown(ctx: AttackContext, text: str, run: str) -> tuple[str, str]:
    """The probe's Markdown of a package whose manifest names a hash for ``text``."""

    def edit(name: str, data: bytes) -> bytes:
        if not name.endswith("extra/aoti_guard/manifest.json"):
            return data
        manifest = json.loads(data)
        manifest["hashes"][text] = "00" * 32
        return json.dumps(manifest).encode()

    folder = ctx.tmp / run
    folder.mkdir()
    pkg = rewrite(ctx.package_copy(), folder / "model.pt2", edit)
    md, summary = folder / "probe.md", folder / "summary.md"
    proc = subprocess.run(
        [sys.executable, "-m", "runtime_probe", str(pkg), "--verify-only", "--markdown", str(md), "-q"],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)},
    )
    if proc.returncode != 1 or not md.exists():
        raise AttackSucceeded(f"the probe of the edited manifest exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return md.read_text(), summary.read_text()


def _probe_markdown_injection(ctx: AttackContext) -> str:
    hostile, summary = _probe_markdown(ctx, _HOSTILE, "hostile")
    benign, _ = _probe_markdown(ctx, "plain words", "benign")
    if "octocat" not in hostile:
        raise AttackSucceeded("the probe's Markdown does not quote the manifest's text: the attack tests nothing")
    for name, page in (("--markdown", hostile), ("$GITHUB_STEP_SUMMARY", summary)):
        added, refs = markup_added(page, benign), references(render(page))
        if added or refs:
            raise AttackSucceeded(f"a manifest field added markup to the probe's {name} page: {added}, references {refs}")
    return "the probe's Markdown and step summary quote the manifest's text as text: no autolink, mention or element added"


ATTACKS: list[Attack] = [
    Attack(
        "fleet-report-node-speaks-for-another",
        "verdicts",
        "gpu02.json names node gpu01, passing, created 9999-12-31, beside gpu01's failing report",
        "exit 1: gpu01 fails; gpu02.json has no verdict (a report counts only in its own node's file)",
        _node_claims_another,
    ),
    Attack(
        "fleet-report-created-in-the-future",
        "verdicts",
        "a node's later report, passing, created 9999-12-31T23:59:59 (its earlier one fails)",
        "exit 1: a time past the clock skew supersedes nothing",
        _created_beyond_belief("9999-12-31T23:59:59+00:00"),
    ),
    Attack(
        "fleet-report-created-not-a-date",
        "verdicts",
        "a node's later report, passing, created 'zzz' (sorts after every date as a string)",
        "exit 1: a created that is not a date supersedes nothing",
        _created_beyond_belief("zzz"),
    ),
    Attack(
        "fleet-report-no-package-digest",
        "verdicts",
        "a passing report without package.sha256 beside one of package ab..ab",
        "exit 2: refused as two packages, naming the report without a digest",
        _no_digest,
    ),
    Attack(
        "fleet-report-401-digit-seconds",
        "numeric overflow",
        "a 401-digit integer as a phase's seconds in one node's report (OverflowError in float())",
        "exit 1 from the other node's failure; that node: no verdict; no traceback",
        _huge_number,
    ),
    Attack(
        "fleet-report-symlinked-folder",
        "fleet inputs",
        "the reports folder given as a symlink to the real folder",
        "exit 0: the folder it names is read",
        _symlinked_folder,
    ),
    Attack(
        "fleet-report-markdown-node-text",
        "Markdown injection",
        "links, images, emphasis, HTML, autolinks, @mention, #12, GH-3 and a table row in a node's GPU name, finding and reason",
        "the --markdown page and $GITHUB_STEP_SUMMARY render the same elements as with plain words, and no mention or reference",
        _fleet_markdown_injection,
    ),
    Attack(
        "probe-markdown-manifest-autolinks",
        "Markdown injection",
        "a manifest hash entry named with autolinks, an @mention, #12, GH-3, a link and HTML (quoted by manifest.invalid)",
        "the probe's --markdown page and $GITHUB_STEP_SUMMARY quote it as text: no element, mention or reference added",
        _probe_markdown_injection,
    ),
]
