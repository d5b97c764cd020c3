"""Turn a model's reply into findings, carry-forward lines and an optional STATUS.

JSON is what the prompts ask for: ``{"findings": [{title, severity, location, category,
description}, ...]}``, alone, inside a ```json fence, among prose, or as a bare array. Models do not
always comply, so a tolerant text parser reads ``Title:`` / ``Severity:`` / ``Location:`` /
``Category:`` / ``Description:`` blocks (numbered, bulleted or bold) as a fallback.

Zero findings must be said, not inferred: ``{"findings": []}``, "No issues found" or "none" parse
as zero findings, as does a reply that is only a STATUS line, carry-forward entries or GATE lines
(a custom review gate judged: ``GATE: <rule> — PASS|FAIL — <evidence>``). Anything else raises
:class:`Unparseable`, which a skill reports as NOT_RUN with the reason.

A finding without a severity gets 5, the middle of the scale, rather than being dropped; a
severity outside 1-10 is clamped.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from verify_dag import skills
from verify_dag.models.base import Frozen
from verify_dag.models.carry import Deferred, Reaffirmed, Reopened
from verify_dag.models.findings import ISSUE_CLASSES, Finding, IssueClass, Location


class JudgedGate(Frozen):
    """A custom review gate as the reviewer judged it, in its reply's words."""

    rule: str
    status: Literal["PASS", "FAIL"]
    evidence: str


class Unparseable(ValueError):
    """The reply is neither findings nor an explicit statement that there are none."""


class ParsedReply(Frozen):
    findings: tuple[Finding, ...] = ()
    reaffirmed: tuple[Reaffirmed, ...] = ()
    reopened: tuple[Reopened, ...] = ()
    deferred: tuple[Deferred, ...] = ()
    gates: tuple[JudgedGate, ...] = ()
    status: str | None = None  # e.g. "SKIPPED NO_UI_FILES_IN_SCOPE", "PATCH_CONSTRUCTION_FAILED"


# A reply's category, as models tend to spell it, onto our classes. Anything else falls back to
# the skill's own class (its registry entry): comment-review's tags (narration, stale, ...) are all
# comments.
CATEGORY_CLASS: dict[str, IssueClass] = {
    **{c: c for c in ISSUE_CLASSES},  # a class by its own name
    **{
        k: "security"
        for k in (
            "vulnerability",
            "injection",
            "auth",
            "authz",
            "authentication",
            "authorization",
            "crypto",
            "data-exposure",
        )
    },
    **{
        k: "correctness"
        for k in (
            "bug",
            "logic",
            "error-handling",
            "hardening",
            "architecture",
            "coherence",
            "robustness",
            "concurrency",
            "performance",
            "over-engineering",
            "design-quality",
        )
    },
    **{
        k: "coverage"
        for k in (
            "test",
            "tests",
            "testing",
            "test-quality",
            "test-coverage",
            "mock",
            "mocks",
        )
    },
    **{k: "comment" for k in ("comments", "docstring", "docstrings")},
    **{
        k: "ux"
        for k in (
            "usability",
            "accessibility",
            "a11y",
            "cli-output",
            "error-message",
            "error-messages",
        )
    },
    **{k: "visual" for k in ("layout", "typography", "spacing", "color", "colour")},
    **{k: "style" for k in ("naming", "formatting", "lint")},
    "plan": "plan-completeness",
}
_SEVERITY_WORDS = {
    "critical": 9,
    "high": 7,
    "major": 7,
    "medium": 5,
    "moderate": 5,
    "minor": 3,
    "low": 3,
    "trivial": 1,
    "info": 1,
}

# Line prefixes a model may add: indentation, bullets, bold, headings; never a quote, so a JSON
# "status" key is not mistaken for a STATUS line.
_CARRY = re.compile(
    r"^[\s*#>•-]*(REAFFIRMED|REOPENED|DEFERRED_TO_EPIC)\**\s*:\**\s*(.*)$", re.IGNORECASE
)
_GATE = re.compile(
    r"^[\s*#>•-]*GATE\**\s*:\**\s*(?P<rule>.+?)\s*(?:\u2014|\u2013|--|\s-|\|)\s*\**"
    r"(?P<status>PASS|FAIL)\b\**\s*(?:(?:\u2014|\u2013|--|-|:|\|)\s*(?P<evidence>.*))?$",
    re.IGNORECASE,
)
_STATUS = re.compile(r"^[\s*#>•-]*STATUS\**\s*:\**\s*(.+?)[\s*.]*$", re.IGNORECASE)
# "<id> — <text>": an em/en dash or "--" may be tight, a single "-" needs spaces (ids like F-3).
_SPLIT = re.compile(
    r"^(?P<id>\S+?)\s*(?:\u2014|\u2013|--)\s*(?P<text>.*)$"
    r"|^(?P<id2>\S+)\s+-\s+(?P<text2>.*)$"
)
_NONE = re.compile(
    r"^\W*(?:none(?: found)?|n/a|nothing to report|no new findings|"
    r"no (?:issues|findings|problems|defects)"
    r"(?: (?:were )?(?:found|identified|detected|to report))?"
    r"(?:\s+(?:in|with|for)\b[^.!?]*)?)\W*$",
    re.IGNORECASE,
)
_FIELD = re.compile(
    r"^\s*(?:[-*•]\s+|\d+[.)]\s+|#+\s+)?(?:\*\*|__)?(title|severity|location|file|"
    r"category|description)(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(.*?)\s*$",
    re.IGNORECASE,
)
# A line that is only a heading: "1. **Title**", "### Title", "**Title**" (markdown emphasis or
# heading marks around the whole text).
_HEADING = re.compile(
    r"^\s*(?:\d+[.)]\s+|#+\s+|[-*•]\s+)?(?:\*\*|__)(.+?)(?:\*\*|__)\s*:?\s*$"
    r"|^\s*#+\s+(?:\d+[.)]\s+)?(.+?)\s*$"
)
_FENCE = re.compile(r"```[A-Za-z]*\s*\n(.*?)```", re.DOTALL)
_LOCATION = re.compile(
    r"^(?P<path>.+?)(?::|#L)(?P<line>\d+)(?:\s*[-\u2013]\s*L?(?P<end>\d+))?"
    r"(?::\d+)?$"
)


def parse_reply(text: str, skill: str) -> ParsedReply:
    reaffirmed: list[Reaffirmed] = []
    reopened: list[Reopened] = []
    deferred: list[Deferred] = []
    status: str | None = None
    gates: list[JudgedGate] = []
    rest: list[str] = []
    for line in text.splitlines():
        carry, stat, gate = _CARRY.match(line), _STATUS.match(line), _GATE.match(line)
        if gate:
            gates.append(
                JudgedGate(
                    rule=gate.group("rule").strip(" `*\"'"),
                    status="PASS" if gate.group("status").upper() == "PASS" else "FAIL",
                    evidence=(gate.group("evidence") or "").strip(),
                )
            )
        elif carry:
            kind, value = carry.group(1).upper(), carry.group(2).strip()
            if _NONE.match(value) or not value:
                continue
            ident, sentence = _split(value)
            if kind == "REAFFIRMED":
                reaffirmed.append(Reaffirmed(id=ident, skill=skill, reason=sentence))
            elif kind == "REOPENED":
                reopened.append(Reopened(id=ident, skill=skill, reason=sentence, evidence=sentence))
            else:
                deferred.append(Deferred(issue=ident, item=sentence, source=skill))
        elif stat and status is None:
            status = stat.group(1).strip()
        else:
            rest.append(line)
    # Reaffirmed and reopened at once means the reviewer found new harm for a known finding.
    harmed = {r.id for r in reopened}
    reaffirmed = [r.model_copy(update={"new_harm_evidence": r.id in harmed}) for r in reaffirmed]
    body = "\n".join(rest)
    # JSON is read from the whole reply (removing lines could break it); text from the rest.
    items = _json_items(text)
    explicit = items is not None
    if items is None:
        items = _text_items(body)
    if status is None and explicit:
        status = _json_status(text)
    answered = _said_none(body, status, reaffirmed, reopened, deferred, gates)
    if not items and not explicit and not answered:
        first = next((s for line in text.splitlines() if (s := line.strip())), "")
        raise Unparseable(
            f"neither findings nor an explicit no-findings answer: {first[:120]!r}"
            if first
            else "the reply is empty"
        )
    findings = tuple(_finding(item, skill, n) for n, item in enumerate(items, 1))
    return ParsedReply(
        findings=findings,
        reaffirmed=tuple(reaffirmed),
        reopened=tuple(reopened),
        deferred=tuple(deferred),
        gates=tuple(gates),
        status=status,
    )


def _split(value: str) -> tuple[str, str]:
    m = _SPLIT.match(value)
    if not m:
        return value, ""
    ident = m.group("id") or m.group("id2")
    return ident.strip("`*"), (m.group("text") or m.group("text2") or "").strip()


def _said_none(body: str, status: str | None, *carry: list[Any]) -> bool:
    """A STATUS line, a carry-forward entry, or a reply that *concludes* there is nothing: "No
    issues found in the tests. However, parse() crashes" describes a problem, not a clean pass."""
    if status or any(carry):
        return True
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", body) if s.strip()]
    return bool(sentences) and bool(_NONE.match(sentences[-1]))


def _json_items(body: str) -> list[Any] | None:
    """The findings list from the first JSON value that holds one, or None when there is none."""
    candidates = [m.group(1) for m in _FENCE.finditer(body)] + [body]
    for candidate in candidates:
        stripped = candidate.strip()
        try:
            items = _items(json.loads(stripped))
        except ValueError:
            items = None
        if items is not None:
            return items
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[{\[]", body):  # a JSON object among prose
        try:
            value, _ = decoder.raw_decode(body, m.start())
        except ValueError:
            continue
        items = _items(value)
        if items:  # an empty list inside prose is no answer; it must stand alone to count
            return items
        if isinstance(value, dict) and "findings" in value and items is not None:
            return items
    return None


def _items(value: Any) -> list[Any] | None:
    if isinstance(value, dict):
        if isinstance(value.get("findings"), list):
            return list(value["findings"])
        if "title" in value:
            return [value]
        return None
    if (
        isinstance(value, list)
        and all(isinstance(v, dict) for v in value)
        and (not value or any("title" in v or "description" in v for v in value))
    ):
        return list(value)
    return None


def _json_status(text: str) -> str | None:
    m = re.search(r'"status"\s*:\s*"([^"]+)"', text)
    return m.group(1).strip() if m else None


def _text_items(body: str) -> list[dict[str, str]]:
    items: list[dict[str, str]] = []
    headed: list[dict[str, str]] = []  # items opened by a heading line, not a Title: field
    current: dict[str, str] | None = None
    last_key = ""
    for line in body.splitlines():
        m = _FIELD.match(line)
        heading = None if m else _HEADING.match(line)
        if m:
            key = m.group(1).lower()
            key = "location" if key == "file" else key
            if key == "title" or current is None or key in current:
                current = {}
                items.append(current)
            current[key] = m.group(2)
            last_key = key
        elif heading:
            # "1. **Division by zero**" followed by "- Severity: 7" lines: the heading is the
            # title, not a stray line before the first field.
            current = {"title": (heading.group(1) or heading.group(2)).strip()}
            items.append(current)
            headed.append(current)
            last_key = "title"
        elif current is not None and last_key == "description" and line.strip():
            current["description"] += "\n" + line.strip()
        elif not line.strip():
            last_key = ""  # a blank line ends a description
    # A heading with no field under it ("## Findings") was a section title, not a finding.
    return [i for i in items if not any(i is h for h in headed) or len(i) > 1]


def _finding(item: Any, skill: str, n: int) -> Finding:
    if not isinstance(item, dict):
        raise Unparseable(f"finding {n} is not an object: {item!r:.80}")
    title = _text(item.get("title"))
    description = _text(item.get("description"))
    if not title and not description:
        raise Unparseable(f"finding {n} has neither a title nor a description")
    category = _text(item.get("category")).lower().replace(" ", "-").replace("_", "-")
    spec = skills.SKILLS.get(skill)  # the verification tools' model arms are no skills of ours
    issue_class = CATEGORY_CLASS.get(category, spec.issue_class if spec else "correctness")
    return Finding(
        title=title or description.splitlines()[0][:120],
        severity=_severity(item.get("severity")),
        description=description,
        source=skill,
        issue_class=issue_class,
        location=_location(item.get("location", item.get("file"))),
    )


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _severity(value: Any) -> int:
    if isinstance(value, bool):
        return 5
    if isinstance(value, int | float):
        number = float(value)
    else:
        raw = _text(value).lower().strip("*")
        m = re.match(r"(\d+(?:\.\d+)?)", raw)
        if m:
            number = float(m.group(1))
        else:
            number = float(next((v for k, v in _SEVERITY_WORDS.items() if raw.startswith(k)), 5))
    return max(1, min(10, round(number)))


def _location(value: Any) -> Location | None:
    if isinstance(value, dict):
        path = _text(value.get("path") or value.get("file"))
        if not path:
            return None
        return Location(
            path=path,
            line=_int(value.get("line")),
            end_line=_int(value.get("end_line", value.get("endLine", value.get("end")))),
        )
    raw = _text(value).strip("`*'\"")
    if raw.lower() in ("", "null", "none", "n/a", "-"):
        return None
    m = _LOCATION.match(raw)
    if not m:
        return Location(path=raw)
    return Location(
        path=m.group("path").strip(),
        line=int(m.group("line")),
        end_line=int(m.group("end")) if m.group("end") else None,
    )


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
