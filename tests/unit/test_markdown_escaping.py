"""Markdown escaping, tested by rendering as GitHub does (tests/gfm.py): hostile text in a cell, a
list item, a heading, inline code or a fenced block adds no link, image, emphasis, HTML, row, cell,
mention or issue reference; and the probe's whole Markdown report, with every field hostile, has
the markup of the same report with plain words."""

from __future__ import annotations

import pytest

from runtime_probe.reporting.escaping import for_markdown, for_markdown_code, for_markdown_fenced
from runtime_probe.reporting.findings import error, warning
from runtime_probe.reporting.markdown import render_markdown
from runtime_probe.reporting.report import Report, make_phase
from tests.gfm import markup_added, references, render

# one of each way text can become markup on GitHub
HOSTILE = [
    "[click](https://evil.example/x)",
    "![pixel](https://evil.example/p.png)",
    "**bold** __bold__ _em_ *em*",
    "<img src=x onerror=alert(1)>",
    "<b>raw</b><script>alert(1)</script>",
    "<a href='https://evil.example'>a</a>",
    "<!-- hidden --> <details><summary>x</summary>",
    "www.evil.example",
    "https://evil.example/a",
    "<https://evil.example>",
    "mailto:user@evil.example",
    "user@evil.example",
    "@octocat and @org/team",
    "#123 owner/repo#12 GH-12 gh-7",
    "a | b | c",
    "cell\n| x | y |\n| z | w |",
    "`code` ``more``",
    "&amp; &#x41; &lt;b&gt;",
    "~~strike~~ ~one~",
    "line\n\n# a heading\n- a list item\n> a quote",
    "[ref]: https://evil.example",
    "\\",
    "---",
    "\x1b[31mred\u202e",
]
ALL = " ".join(HOSTILE)


def page(cell: str, code: str) -> str:
    """A table, a list item and a heading holding ``cell``, and a cell of inline ``code``."""
    return f"#### {cell}\n\n| a | b |\n|---|---|\n| {cell} | {code} |\n\n- item: {cell}\n"


@pytest.mark.parametrize("text", [*HOSTILE, ALL], ids=[*(f"h{i}" for i in range(len(HOSTILE))), "all"])
def test_hostile_text_adds_no_markup(text: str) -> None:
    hostile = page(for_markdown(text), for_markdown_code(text))
    benign = page(for_markdown("word"), for_markdown_code("word"))
    assert markup_added(hostile, benign) == {}, render(hostile)
    assert references(render(hostile)) == [], render(hostile)


def test_a_word_joiner_breaks_references_and_the_page_reads_the_same() -> None:
    html = render(for_markdown("see @octocat, #12, GH-3 and www.example.org"))
    assert "<a" not in html and references(html) == []
    assert html.replace("\u2060", "") == "<p>see @octocat, #12, GH-3 and www.example.org</p>\n"


def test_newlines_read_as_spaces_not_escapes() -> None:
    # issue 44 item 9: torch's multi-line messages showed as \x0a in pull request comments
    assert for_markdown("expected\nfound\r\n  more") == "expected found more"
    assert for_markdown_code("a\nb") == "`a b`"
    assert for_markdown_fenced("a\nb") == "a b"
    assert "\\x0a" not in for_markdown("x\ny") + for_markdown_code("x\ny") + for_markdown_fenced("x\ny")


def test_a_fenced_line_keeps_its_spaces_and_cannot_close_the_fence() -> None:
    lines = ["stage   | max |diff|", "```", "   ````` x", "<b>@octocat</b> [l](https://e.example)"]
    doc = "```\n" + "\n".join(for_markdown_fenced(line) for line in lines) + "\n```\nafter\n"
    html = render(doc)
    assert html.count("<pre>") == 1 and "<p>after</p>" in html and "<b>" not in html and "<a" not in html
    assert for_markdown_fenced("stage   | max") == "stage   | max"


def probe_report(text: str) -> Report:
    """A probe report with ``text`` in every field a package or a host can fill."""
    findings = [  # codes are registered (findings.CODES); every other field is the package's
        error("archive.hash_mismatch", text, text, expected=text, found=text, hint=text),
        warning("archive.signature_unchecked", text, text, hint=text),
    ]
    phases = (
        make_phase("archive", 0.1, findings, {"checked": [text]}),
        make_phase("golden", 0.0, [], skipped_reason=f"skipped: {text}"),
    )
    section = Report(kind="probe", package={}, phases=(make_phase("host", 0.1, []),), title=text)
    return Report(
        kind="probe",
        package={"path": f"/models/{text}.pt2", "sha256": text},
        phases=phases,
        sections=(section,),
        tool_version=text,
    )


def test_probe_markdown_with_every_field_hostile_has_the_plain_reports_markup() -> None:
    hostile, benign = render_markdown(probe_report(ALL)), render_markdown(probe_report("word"))
    assert markup_added(hostile, benign) == {}, render(hostile)
    assert references(render(hostile)) == []
    assert "\x1b" not in hostile and "\u202e" not in hostile
