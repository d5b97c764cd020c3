"""comment-review's deterministic rules (the comment-review skill): no model needed.

Only comments and docstrings on added or modified lines are read. Three rules:

- ``review-reference``: an ephemeral review id (VI-3, CI-12, R2-4) or "per review feedback".
  Severity 6: the id means nothing once the review is closed, so every later reader is misled.
- ``change-narration``: history in a comment ("previously", "now we", "replaced X with Y").
  Severity 5: git owns history; the comment should say what the code does now.
- ``comment-density``: one diff-level finding when added comment lines exceed a share of added
  code lines (default 10%; ``VERIFY_DAG_COMMENT_DENSITY``, else ``comment-density`` under
  ``[tool.verify-dag]`` in the repository's pyproject.toml; ``0.1`` or ``"10%"``). Severity 5.

comment-review is held to severity 5-6 as a deliberate floor. Each finding quotes the
offending text and gives a concrete rewrite or "delete". Shebangs, license headers and tool
pragmas (``type: ignore``, ``noqa``, ``eslint-disable``, ...) are not prose and are never read.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from verify_dag.errors import UsageError
from verify_dag.models.findings import Finding, Location
from verify_dag.models.scope import Scope
from verify_dag.reviewers.comment_syntax import Comment, extract
from verify_dag.settings import DENSITY_ENV, DENSITY_KEY, parse_density

SKILL = "comment-review"
DEFAULT_DENSITY = 0.10
SEVERITY_REVIEW_ID = 6
SEVERITY_NARRATION = 5
SEVERITY_DENSITY = 5
# A ratio over a handful of lines measures nothing (one comment on one line is 100%).
_MIN_DENSITY_COMMENTS = 3
_EXCERPT = 120


_URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", re.I)
_REVIEW = (
    re.compile(r"\b(?:VI|CI)-\d+\b|\bR\d+-\d+\b"),
    re.compile(
        r"\b(?:per|address(?:es|ed|ing)?)\s+(?:the\s+|a\s+)?(?:code\s+|PR\s+)?"
        r"review(?:er)?(?:'s)?(?:\s+(?:feedback|comments?|notes?|findings?))?\b",
        re.I,
    ),
    re.compile(
        r"\bas\s+(?:requested|suggested|asked(?:\s+for)?|noted|flagged)\s+(?:in|by|during)"
        r"\s+(?:the\s+)?(?:code\s+|PR\s+)?review(?:er)?s?\b",
        re.I,
    ),
    re.compile(r"\breview\s+feedback\b", re.I),
)
# "now we have/know/can" describes the program's flow at that point, not the code's history.
_FLOW = r"(?!\s+(?:have|know|can|need|must|should|are|will|may|got|hold|own)\b)"
_NOW = re.compile(
    rf"\bnow,?\s+we\b{_FLOW}|\bwe\s+now\b{_FLOW}|\b(?:it|this|that)\s+now\s+"
    r"(?:\w+s|is|are|has)\b",
    re.I,
)
# "the handle is no longer valid once closed" is about runtime state, not history.
_NO_LONGER = re.compile(r"\bno\s+longer\b", re.I)
_NARRATION = (
    re.compile(
        r"(?:^|(?<=[.!?;] ))previously\b|\bpreviously(?=,|\s+(?:we|it|this|that|these|"
        r"they|the|there|a|an|i)\b)",
        re.I,
    ),
    re.compile(
        r"\b(?:we|it|this|that|they|which|i|you|code)\s+(?:always\s+|only\s+|never\s+)?"
        r"used\s+to\b|\bused\s+to\s+be\b",
        re.I,
    ),
    _NOW,
    _NO_LONGER,
    re.compile(
        r"\b(?:was|were|has\s+been|have\s+been)\s+(?:changed|switched|moved|renamed)\s+to\b", re.I
    ),
    re.compile(r"\breplaced\s+(?!with\b|by\b)\S+(?:\s+\S+){0,6}?\s+with\b", re.I),
    re.compile(
        r"\binstead\s+of\s+the\s+(?:old|previous|former)\b|\bthe\s+(?:old|previous|former)"
        r"\s+(?:code|implementation|approach|version|behaviou?r|logic)\b",
        re.I,
    ),
    re.compile(r"\bswitched\s+from\b", re.I),
    # "swapped the list for a set": the history of the code, like "replaced X with Y".
    re.compile(r"\bswapped\s+(?!out\b)\S+(?:\s+\S+){0,6}?\s+(?:for|with)\b", re.I),
)
_STATE = re.compile(r"\b(?:once|after|when|whenever|until|if|unless)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\s+(?:--|\u2014)\s+")


def _narration(text: str) -> re.Match[str] | None:
    for pattern in _NARRATION:
        m = pattern.search(text)
        if m is not None and not (pattern is _NO_LONGER and _STATE.search(text)):
            return m
    return None


def _tidy(text: str) -> str:
    text = re.sub(r"\(\s*\)|\[\s*\]", "", text)
    text = re.sub(r"\s+([,.;:)\]])", r"\1", re.sub(r"\s{2,}", " ", text))
    text = text.strip(" ,;:-\u2014\t")
    return text[:1].upper() + text[1:]


def _rewrite(text: str) -> str:
    return f'"{text}"' if len(re.findall(r"[A-Za-z]{2,}", text)) >= 2 else "delete"


def _review_rewrite(text: str) -> str:
    for pattern in _REVIEW:
        text = pattern.sub("", text)
    return _rewrite(_tidy(text))


def _narration_rewrite(text: str) -> str:
    kept: list[str] = []
    for sentence in _SENTENCE.split(text):
        m = _narration(sentence)
        if m is None:
            kept.append(sentence)
        elif m.re is _NOW and _narration(_NOW.sub(_drop_now, sentence)) is None:
            kept.append(_NOW.sub(_drop_now, sentence))  # "now we cache" -> "we cache"
    return _rewrite(_tidy(" ".join(kept)))


def _drop_now(m: re.Match[str]) -> str:
    return re.sub(r"\bnow,?\s*", "", m.group(), flags=re.I).strip()


def _finding(
    path: str, line: int, rule: str, severity: int, title: str, text: str, what: str, rewrite: str
) -> Finding:
    excerpt = text if len(text) <= _EXCERPT else text[: _EXCERPT - 3] + "..."
    return Finding(
        title=title,
        severity=severity,
        source=SKILL,
        issue_class="comment",
        location=Location(path=path, line=line),
        rule=rule,
        description=f'{what}. Comment: "{excerpt}" Rewrite: {rewrite}',
    )


def _line_findings(path: str, c: Comment) -> list[Finding]:
    text = _URL.sub("", c.text)
    out: list[Finding] = []
    hit = next((m for p in _REVIEW if (m := p.search(text)) is not None), None)
    if hit is not None:
        out.append(
            _finding(
                path,
                c.line,
                "review-reference",
                SEVERITY_REVIEW_ID,
                f'Comment cites a review ("{hit.group()}")',
                c.text,
                "Comment refers to a review that later readers cannot see; describe the behaviour, "
                "not the review",
                _review_rewrite(text),
            )
        )
    narr = _narration(text)
    if narr is not None:
        out.append(
            _finding(
                path,
                c.line,
                "change-narration",
                SEVERITY_NARRATION,
                f'Comment narrates history ("{narr.group()}")',
                c.text,
                "Comment narrates how the code changed (git keeps that); state what the code does "
                "now",
                _narration_rewrite(text),
            )
        )
    return out


def density_threshold(workdir: Path, env: Mapping[str, str] | None = None) -> float:
    """The density threshold: the environment, else the repository's pyproject, else 10%."""
    env = os.environ if env is None else env
    if env.get(DENSITY_ENV, "").strip():
        return parse_density(env[DENSITY_ENV].strip(), f"environment {DENSITY_ENV}")
    pyproject = workdir / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise UsageError(f"{pyproject}: cannot read: {exc}") from exc
        tool = data.get("tool")
        table = tool.get("verify-dag") if isinstance(tool, dict) else None
        if isinstance(table, dict) and DENSITY_KEY in table:
            return parse_density(table[DENSITY_KEY], f"{pyproject} [tool.verify-dag] {DENSITY_KEY}")
    return DEFAULT_DENSITY


def _density(counts: dict[str, tuple[int, int]], threshold: float) -> Finding | None:
    comments = sum(c for c, _ in counts.values())
    code = sum(k for _, k in counts.values())
    if comments < _MIN_DENSITY_COMMENTS or comments <= threshold * code:
        return None
    share = f"{comments / code:.0%} of added code lines" if code else "with no added code"
    top = sorted(((c, p) for p, (c, _) in counts.items() if c), reverse=True)[:3]
    where = ", ".join(f"{p} ({c})" for c, p in top)
    return Finding(
        title=f"Comment density {share} (threshold {threshold:.0%})",
        severity=SEVERITY_DENSITY,
        source=SKILL,
        issue_class="comment",
        rule="comment-density",
        description=(
            f"{comments} added comment lines against {code} added code lines "
            f"(threshold {threshold:.0%}); most in {where}. Rewrite: keep the 1-2 "
            "lines that say why, delete the comments that restate the code."
        ),
    )


def run(
    scope: Scope,
    workdir: Path,
    threshold: float | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Findings on comments added or modified in ``scope``; ``workdir`` holds its new commit."""
    if threshold is None:
        threshold = density_threshold(workdir, env)
    findings: list[Finding] = []
    counts: dict[str, tuple[int, int]] = {}  # path -> (added comment lines, added code lines)
    for change in scope.included:
        path = workdir / change.path
        if change.status == "deleted" or change.binary or not path.is_file():
            continue
        try:
            source = path.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        found = extract(change.path, source)
        if found is None:
            continue
        comments = [c for c in found[0] if change.covers(c.line)]
        for c in comments:
            findings.extend(_line_findings(change.path, c))
        counted = {c.line for c in comments if not c.doc}
        counts[change.path] = (len(counted), sum(1 for n in found[1] if change.covers(n)))
    dense = _density(counts, threshold)
    return findings + ([dense] if dense else [])
