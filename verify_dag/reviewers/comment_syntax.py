"""Comment extraction for comment-review, by language: which lines are comments, which are code.

Python is read with ``tokenize`` (comments, and docstrings as documentation); C-like languages
(``//`` and ``/* */``) and ``#`` languages (shell, YAML, TOML) by a regex that also matches the
string literals around comments, so a ``//`` or ``#`` inside a string is not taken for one.
``extract`` returns only prose: shebangs, a leading license block and tool pragmas are dropped.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Comment:
    line: int
    text: str  # this line's words, comment markers stripped
    doc: bool = False  # docstring or doc comment: API documentation, left out of the density


_PY = frozenset({".py", ".pyi"})
_JS = frozenset({".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"})
_CLIKE = _JS | {
    ".go",
    ".rs",
    ".java",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".cxx",
    ".hpp",
    ".hh",
    ".cs",
    ".kt",
    ".kts",
    ".swift",
    ".scala",
}
_HASH = frozenset({".sh", ".bash", ".zsh", ".ksh", ".yml", ".yaml", ".toml"})
_DQ = r'"(?:\\.|[^"\\\n])*"'
# Outside JS, `'` opens a short char literal; a Rust lifetime ('a) has no closing quote.
_CHAR, _JS_SQ = r"'(?:\\.|[^'\\\n]){1,10}'", r"'(?:\\.|[^'\\\n])*'"
_BACKTICK = r"`[^`]*`"  # JS template literals and Go raw strings, both may span lines


def _clike_re(suffix: str) -> re.Pattern[str]:
    strings = [_DQ, _JS_SQ if suffix in _JS else _CHAR]
    if suffix in _JS or suffix == ".go":
        strings.append(_BACKTICK)
    return re.compile(r"(?P<line>//[^\n]*)|(?P<block>/\*.*?(?:\*/|\Z))|" + "|".join(strings), re.S)


_HASH_RE = re.compile(r"(?P<line>(?:(?<=\s)|^)#[^\n]*)|" + _DQ + r"|'[^'\n]*'", re.M)


def _scan(source: str, pattern: re.Pattern[str]) -> tuple[list[Comment], set[int]]:
    """Comments and code lines from a regex that matches comments and the strings around them."""
    comments: list[Comment] = []
    masked = list(source)
    for m in pattern.finditer(source):
        kind = m.lastgroup
        if kind is None:
            continue  # a string literal: code
        first = source.count("\n", 0, m.start()) + 1
        text = m.group()
        for k in range(m.start(), m.end()):
            if masked[k] != "\n":
                masked[k] = " "
        if kind == "line":
            doc = text.startswith(("///", "//!")) and not text.startswith("////")
            comments.append(Comment(first, text.lstrip("/#!" if doc else "/#"), doc))
            continue
        doc = text.startswith("/**") and not text.startswith("/**/")
        body = text[2:-2] if text.endswith("*/") and len(text) >= 4 else text[2:]
        for n, part in enumerate(body.split("\n")):
            comments.append(Comment(first + n, part.strip().lstrip("*"), doc))
    code = {n + 1 for n, line in enumerate("".join(masked).split("\n")) if line.strip()}
    return comments, code


_LAYOUT = frozenset(
    {
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
        tokenize.COMMENT,
        tokenize.ENCODING,
    }
)
_STRING_OPEN = re.compile(r"^[rRbBuUfF]*(?:\"\"\"|'''|\"|')")


def _python(source: str) -> tuple[list[Comment], set[int]]:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source, newline="\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return _scan(source, _HASH_RE)  # unparseable: still read its `#` comments
    comments: list[Comment] = []
    code: set[int] = set()
    significant = [t for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL)]
    for i, tok in enumerate(significant):
        before = significant[i - 1].type if i else tokenize.NEWLINE
        after = significant[i + 1].type if i + 1 < len(significant) else tokenize.ENDMARKER
        # A string that is a whole statement is a docstring (or an inline "comment" string).
        if (
            tok.type == tokenize.STRING
            and after in (tokenize.NEWLINE, tokenize.ENDMARKER)
            and before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        ):
            for n, part in enumerate(tok.string.split("\n")):
                text = _STRING_OPEN.sub("", part.strip()).rstrip("\"'")
                comments.append(Comment(tok.start[0] + n, text, doc=True))
        elif tok.type not in _LAYOUT:
            code.update(range(tok.start[0], tok.end[0] + 1))
    comments += [Comment(t.start[0], t.string[1:]) for t in tokens if t.type == tokenize.COMMENT]
    return comments, code


def extract(path: str, source: str) -> tuple[list[Comment], set[int]] | None:
    suffix = Path(path).suffix.lower()
    if suffix in _PY:
        found = _python(source)
    elif suffix in _CLIKE:
        found = _scan(source, _clike_re(suffix))
    elif suffix in _HASH:
        found = _scan(source, _HASH_RE)
    else:
        return None
    return _prose(*found), found[1]


_PRAGMA = re.compile(
    r"^\s*(?:type:\s*ignore|noqa|pragma\b|pylint:|mypy:|pyright:|fmt:|isort:|ruff:|nosec|"
    r"-\*-|vim?:|eslint[- ]|prettier-ignore|@ts-|istanbul |c8 |jshint|nolint|shellcheck |"
    r"yamllint |clang-format|(?-i:go:|\+build|NOSONAR|NOLINT))",
    re.I,
)
_LICENSE = re.compile(r"copyright|licen[cs]e|SPDX-License-Identifier", re.I)


def _prose(comments: list[Comment], code: set[int]) -> list[Comment]:
    """Drop what is not prose: the shebang, a leading license block, pragmas."""
    comments = sorted(comments, key=lambda c: c.line)
    header: set[int] = set()
    expected = 1
    for c in comments:  # the comment block the file starts with
        if c.line != expected or c.doc or c.line in code:
            break
        header.add(c.line)
        expected += 1
    if not any(_LICENSE.search(c.text) for c in comments if c.line in header):
        header = set()
    out: list[Comment] = []
    for c in comments:
        text = c.text
        if (c.line == 1 and text.startswith("!")) or c.line in header:
            continue
        while (m := _PRAGMA.match(text)) is not None:
            # `# type: ignore[x]  # why` keeps its `why`; a pragma alone is dropped.
            rest = text.find("#", m.end())
            text = text[rest + 1 :] if rest >= 0 else ""
        if text.strip():
            out.append(Comment(c.line, text.strip(), c.doc))
    return out
