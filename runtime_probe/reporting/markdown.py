"""The report as Markdown: ``--markdown FILE`` on build and probe, and the summary appended to
``$GITHUB_STEP_SUMMARY`` when that is set (a GitHub Actions job's summary page).

One table of phases, then each error and warning with expected, found and the hint, then the
phase details the text report shows (latency, coverage, margins, the stage table) in a code block.
Everything from the package goes through ``runtime_probe.reporting.escaping`` (``for_markdown``,
``for_markdown_code``, ``for_markdown_fenced``): a name cannot add a row, a link, an image, HTML,
a mention or an issue reference to the page.
"""

from __future__ import annotations

import os
import sys

from runtime_probe.reporting.errors import GuardError
from runtime_probe.reporting.escaping import for_markdown, for_markdown_code, for_markdown_fenced, for_terminal
from runtime_probe.reporting.findings import Finding, Severity
from runtime_probe.reporting.output import append_output
from runtime_probe.reporting.paths import Paths
from runtime_probe.reporting.report import SKIPPED, Report, detail_lines

__all__ = ["STEP_SUMMARY", "append_step_summary", "render_markdown"]

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def _finding(f: Finding) -> str:
    md, code = for_markdown, for_markdown_code
    line = f"- **{f.severity.value}** {code(f.code)} ({md(f.phase)}): {md(f.message)}"
    if f.expected is not None or f.found is not None:
        line += f"; expected {code(f.expected if f.expected is not None else '-')}, found {code(f.found if f.found is not None else '-')}"
    if f.hint:
        line += f"  \n  hint: {md(f.hint)}"
    return line


def render_markdown(report: Report) -> str:
    """The report as a Markdown section (it can be appended to a page that holds others)."""
    md, code = for_markdown, for_markdown_code
    subject = report.package.get("path") or report.kind
    verdict = "PASSED" if report.passed else "FAILED"
    errors = [f for f in report.findings if f.severity is Severity.ERROR]
    warnings = [f for f in report.findings if f.severity is Severity.WARNING]
    strict = " (--strict: warnings fail)" if report.strict else ""
    lines = [
        f"### {md(report.kind)} {code(os.path.basename(str(subject)))}: {verdict}",
        "",
        f"{len(errors)} error(s), {len(warnings)} warning(s){strict}; exit code {report.exit_code}. "
        f"{md(report.tool_version and 'Tool version ' + report.tool_version + '.')}",
    ]
    sha = report.package.get("sha256")
    if sha:
        lines.append(f"Package sha256 {code(sha)}.")
    for section in (report, *report.sections):
        if section is not report:
            lines += ["", f"#### {md(section.title or section.kind)}"]
        lines += ["", "| phase | status | seconds | findings |", "| --- | --- | ---: | --- |"]
        for p in section.phases:
            counts = [
                f"{n} {label}"
                for label, n in (
                    ("error(s)", sum(f.severity is Severity.ERROR for f in p.findings)),
                    ("warning(s)", sum(f.severity is Severity.WARNING for f in p.findings)),
                )
                if n
            ]
            status = md(p.status) if p.status != SKIPPED else f"skipped: {md(str(p.detail.get('reason', '')).removeprefix('skipped: '))}"
            lines.append(f"| {code(p.name)} | {status} | {p.seconds:.2f} | {', '.join(counts) or '-'} |")
    if errors or warnings:
        lines += ["", "**Findings**", ""] + [_finding(f) for f in (*errors, *warnings)]
    details = [f"{p.name}: {line}" for s in (report, *report.sections) for p in s.phases for line in detail_lines(p)]
    if details:
        lines += ["", "<details><summary>details</summary>", "", "```"]
        lines += [for_markdown_fenced(line) for line in details]
        lines += ["```", "", "</details>"]
    return "\n".join(lines) + "\n\n"


def append_step_summary(report: Report, paths: Paths | None = None) -> None:
    """Append the Markdown to ``$GITHUB_STEP_SUMMARY`` when it is set (GitHub Actions sets it for
    each step). A summary that cannot be written is said on stderr; it never changes the exit code.

    ``paths``: the run's path rule (runtime_probe/reporting/paths.py): the summary is never appended to a
    file the run reads (the package) or another of its outputs. The file is opened and written
    without blocking (runtime_probe/reporting/output.py): a FIFO or device without a reader is a warning,
    never a hung run."""
    path = os.environ.get(STEP_SUMMARY)
    if not path:
        return
    try:
        if paths is not None:
            paths.check_file(f"${STEP_SUMMARY}", path)
        append_output(path, render_markdown(report).encode(), f"${STEP_SUMMARY} ({path})")
    except GuardError as exc:
        print(f"warning: the summary was not appended: {for_terminal(exc.message)}", file=sys.stderr)
