"""Markdown tested by rendering it as GitHub does (cmarkgfm: GitHub's fork of cmark, with its tables,
autolinks, strikethrough and tag filter), not by looking for escapes in the source.

``markup_added(hostile, benign)`` compares two renderings of one page, one with hostile text where
the other has plain words: every element the hostile one has more of (a link, an image, emphasis,
a row, a cell, raw HTML) was added by that text. ``references(html)`` lists the ``@name`` mentions
and ``#123`` issue references GitHub would link in text outside code (GitHub adds those after
cmark, so cmark's HTML still holds them as text).
"""

from __future__ import annotations

import re
from collections import Counter

import cmarkgfm

__all__ = ["markup_added", "references", "render", "tags"]

_TAG = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)\b")
_CODE = re.compile(r"<code>.*?</code>|<pre>.*?</pre>", re.S)
# what GitHub links in text: a mention (@name, @org/team) and an issue reference (#12, owner/repo#12, GH-12)
_REFERENCE = re.compile(r"(?<![\w`])@[A-Za-z0-9][\w-]*|(?:\b[\w.-]+/[\w.-]+)?#\d+\b|\bGH-\d+\b")


def render(markdown: str) -> str:
    """``markdown`` as GitHub renders it (GFM extensions on, raw HTML filtered as GitHub does)."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown)


def tags(html: str) -> Counter[str]:
    """How many of each element the HTML has (``a``, ``img``, ``strong``, ``tr``, ``td``...)."""
    return Counter(m.group(1).lower() for m in _TAG.finditer(html))


def markup_added(hostile: str, benign: str) -> dict[str, int]:
    """The elements the hostile page has more of than the benign one (empty: the text added none)."""
    more = tags(render(hostile))
    more.subtract(tags(render(benign)))
    return {tag: n for tag, n in more.items() if n > 0}


def references(html: str) -> list[str]:
    """Mentions and issue references left in text outside code (a word joiner breaks them)."""
    return _REFERENCE.findall(_CODE.sub("", html))
