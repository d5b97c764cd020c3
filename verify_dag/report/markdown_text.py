"""Text for the Markdown report: table cells, one-line text, and file names as git quotes them.

Every value a report carries passes through one of these before it reaches the Markdown, so a
`|`, a newline or an odd file name can never break a table or show a different name.
"""

from __future__ import annotations

import re

from verify_dag.models.report import IssueLocation

# git's C-style quoting of file names (quote.c), so a quoted name reads as git prints it.
_C_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}


def cell(text: object) -> str:
    """One table cell: a `|` or a newline inside it would break the row. Line breaks become
    " / " and paragraph breaks " // ", not an HTML tag, so the table reads in a terminal too."""
    s = str(text).replace("|", "\\|").replace("\r\n", "\n").replace("\r", "\n")
    paragraphs = [" / ".join(p.split("\n")) for p in s.split("\n\n")]
    return " // ".join(paragraphs)


def path_text(path: str) -> str:
    """A file name as one unambiguous piece of Markdown.

    Names git would quote (a control character such as a newline, a backslash, a double quote)
    are shown as git quotes them, "a\\nb.py", in a code span so Markdown keeps the backslashes.
    Turning the newline into a space or a line break instead would show a different file name.
    """
    if all(c.isprintable() and c not in _C_ESCAPES for c in path):
        return path
    quoted = '"' + "".join(_quote_char(c) for c in path) + '"'
    fence = "`" * (max(map(len, re.findall("`+", quoted)), default=0) + 1)
    return f"{fence}{quoted}{fence}"


def _quote_char(c: str) -> str:
    if c in _C_ESCAPES:
        return _C_ESCAPES[c]
    return c if c.isprintable() else "".join(f"\\{b:03o}" for b in c.encode())


def inline(text: object) -> str:
    """Text inside a list item or a paragraph: a newline would end it early."""
    return " ".join(str(text).splitlines())


def table(header: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def code(value: object) -> str:
    return "`null`" if value is None else f"`{value}`"


def location_text(loc: IssueLocation | None) -> str:
    if loc is None:
        return "—"
    path = path_text(loc.path)
    if loc.line is None:
        return path
    end = f"-{loc.end_line}" if loc.end_line is not None else ""
    return f"{path}:{loc.line}{end}"
