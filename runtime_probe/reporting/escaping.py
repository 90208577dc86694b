"""One cleaning and one escaping function per medium that aoti-guard writes untrusted text to.

Everything a report, an error or a generated script quotes can come from a hostile package, a
node's report, a tensor name in a caller's file or a flag value: a name must not drive the
terminal, fake a line of a log, add a link, image, mention or row to a Markdown page, or run as a
command in a generated script. Every writer to one of these media goes through the function for
that medium here; none escapes by itself.

| medium                                   | function          |
| ---------------------------------------- | ----------------- |
| terminal, log line, text report, XML, error message | ``for_terminal`` |
| Markdown table cell, list item, heading  | ``for_markdown``  |
| Markdown inline code                     | ``for_markdown_code`` |
| one line of a Markdown fenced code block | ``for_markdown_fenced`` |
| a value in a generated shell script      | ``for_shell``     |
"""

from __future__ import annotations

import re
import shlex
import unicodedata

__all__ = [
    "UnsafeValue",
    "for_markdown",
    "for_markdown_code",
    "for_markdown_fenced",
    "for_shell",
    "for_terminal",
    "require_plain",
]

# control, format (bidi overrides such as U+202E, zero-width characters), surrogates, private use,
# unassigned, line and paragraph separators
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def for_terminal(value: object) -> str:
    """``value`` as text safe for a terminal, one log line or an XML file: control (newlines
    included), format and separator characters are escaped (``\\x1b``, ``\\x0a``), so that a name
    can neither drive the terminal nor start a line of its own in a report or a serving log."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(_escape_char(ch) if unicodedata.category(ch) in _UNPRINTABLE else ch for ch in text)


# CommonMark lets a backslash escape any ASCII punctuation: every one that can start markup,
# an entity, a table cell or a GFM autolink is escaped.
_MD_SPECIAL = str.maketrans({c: f"\\{c}" for c in "\\`*_[]<>|~!#&"})
# GitHub links bare addresses (``www.x``, ``http://``, ``a@b.c``) and ``@name`` mentions in text
# AFTER escapes are resolved, so escaping alone does not stop them: a word joiner (U+2060,
# written as an entity so that the Markdown source stays printable) after ``@`` and inside the
# scheme or ``www`` (and after ``#`` of an issue reference, inside ``GH`` of ``GH-12``, GitHub's
# other issue reference) breaks the pattern while the page reads the same.
_WJ = "&#8288;"
_AUTOLINK = re.compile(r"(?i)(@|#(?=\w)|\bwww(?=\.)|\b(?:https?|ftp|mailto|xmpp)(?=:)|\bgh(?=-\d))")


def _one_line(value: object) -> str:
    """Multi-line text (torch's messages) as one line of words, then made terminal-safe."""
    return for_terminal(" ".join(str(value).split()))


def for_markdown(value: object) -> str:
    """Text safe inside a Markdown table cell, list item or heading (GitHub-flavoured): one line,
    no emphasis, link, image, HTML, entity, cell, autolink or mention of its own. A newline (torch's
    messages have them) reads as a space, not as an escape."""
    text = _one_line(value)
    parts = _AUTOLINK.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # a matched autolink trigger: escape it, then break it with a word joiner
            out.append(part.translate(_MD_SPECIAL) + _WJ if len(part) == 1 else part[:1] + _WJ + part[1:])
        else:
            out.append(part.translate(_MD_SPECIAL))
    return "".join(out)


def for_markdown_code(value: object) -> str:
    """``value`` as inline code: one line, no backtick to end the span early, no ``|`` to end a
    table cell (GFM splits cells on ``|`` even inside code: ``\\|`` keeps it)."""
    text = _one_line(value).replace("`", "'").replace("|", "\\|")
    return f"`{text}`"


_FENCE = re.compile(r"`{3,}")


def for_markdown_fenced(value: object) -> str:
    """``value`` as one line inside a fenced code block opened with three backticks: nothing in a
    fence is markup (no link, HTML or mention), so only its end must be kept out. Spaces are kept
    (a table in the details lines up); a newline reads as a space; no run of three backticks
    (which would close the fence, indented or not) is left."""
    return _FENCE.sub(lambda m: "'" * len(m.group()), for_terminal(str(value).replace("\n", " ")))


class UnsafeValue(ValueError):
    """A value refused for a generated script: it holds a character that no quoting makes safe
    everywhere the script uses it (a newline ends a ``#SBATCH`` line or a comment)."""


def require_plain(value: str, what: str) -> str:
    """``value`` unchanged if it holds no control, format or separator character; else
    ``UnsafeValue`` naming ``what`` and the first such character."""
    for ch in value:
        if not ch.isprintable():
            raise UnsafeValue(f"{what} holds the control character {_escape_char(ch)}: '{for_terminal(value)}'")
    return value


def for_shell(value: str, what: str) -> str:
    """``value`` as ONE shell word: checked by ``require_plain`` (a newline would end a line the
    script relies on, a comment or an ``#SBATCH`` directive), then ``shlex.quote``-d."""
    return shlex.quote(require_plain(value, what))
